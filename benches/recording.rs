//! The load generator's hot path, measured: what one recorded operation costs a client
//! (interval selection, two HdrHistogram records, a live counter) and what handing a full
//! interval to the aggregator costs. Run with `cargo bench --bench recording`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use coordbench_bench::runner::{Aggregator, ClientRecorder, IntervalStats, LoadMode, Pacer};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn record_ok(c: &mut Criterion) {
    let start = Instant::now();
    let aggregator = Aggregator::new(start, Duration::from_secs(1));
    let mut recorder = ClientRecorder::new(aggregator, start + Duration::from_secs(3600));
    let mut group = c.benchmark_group("recorder");
    group.throughput(Throughput::Elements(1));
    let mut latency_us = 1u64;
    group.bench_function("record_ok", |b| {
        b.iter(|| {
            // Vary the value so the histogram's bucket lookup is not trivially cached.
            latency_us = latency_us % 50_000 + 97;
            let latency = Duration::from_micros(latency_us);
            recorder.record_ok(
                Instant::now(),
                black_box(latency),
                black_box(latency),
                None,
                None,
            );
        })
    });
    group.finish();
}

fn merge_interval(c: &mut Criterion) {
    let mut one = IntervalStats::new();
    for v in 1..10_000u64 {
        one.latency.saturating_record(v * 7);
        one.service.saturating_record(v * 5);
    }
    c.bench_function("interval/merge", |b| {
        b.iter(|| {
            let mut total = IntervalStats::new();
            total.merge(black_box(&one));
            total
        })
    });
}

fn pacer_next(c: &mut Criterion) {
    let t0 = Instant::now();
    let pacer = Pacer::new(
        LoadMode::Open { rate: 1e9 },
        t0,
        Duration::ZERO,
        Duration::from_secs(1_000_000),
        None,
    );
    c.bench_function("pacer/open_next", |b| b.iter(|| black_box(pacer.next(t0))));
}

criterion_group!(benches, record_ok, merge_interval, pacer_next);
criterion_main!(benches);
