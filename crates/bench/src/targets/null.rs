//! The in-process null target: a driver that does nothing, measuring the load generator;
//! or, with `--service-time D [--service-concurrency C]`, a server of known capacity C / D
//! (every kv request takes D of one of C servers), against which a capacity search can be
//! checked.

use std::path::Path;
use std::sync::Arc;

use coordbench_drivers::etcd::EtcdSecurity;
use coordbench_drivers::null::{NullCoordinator, ServiceModel};
use coordbench_drivers::{ApiFamily, Coordinator};
use futures::future::BoxFuture;
use futures::FutureExt;

use super::{ConnectOptions, Descriptor, LeaderQuery, ReadyTarget};
use crate::args::RunArgs;
use crate::config::RunConfig;
use coordbench_results::kinds::TargetKind;

pub const NULL: Descriptor = Descriptor {
    kind: TargetKind::Null,
    name: "null",
    family: ApiFamily::Null,
    client_lib: |_| "null",
    has_servers: false,
    quorum: false,
    leader: LeaderQuery::None,
    server_counters: false,
    faults: &[],
    faults_note:
        "--fault needs a cluster to fault, and --target null has none; choose another --target",
    workloads: None,
    emulated_disks: true,
    secure: false,
    engine: false,
    default_cluster_size: 3,
    max_cluster_size: None,
    election_timing: |_| Ok(()),
    prepare,
    connect,
    probe: None,
};

/// `--service-time` and `--service-concurrency`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct NullServiceArgs {
    /// null: every kv request (put, get) takes this long of one of --service-concurrency
    /// servers, first come first served: a target whose capacity is concurrency / time.
    #[arg(long, value_parser = coordbench_results::parse::parse_duration)]
    pub service_time: Option<std::time::Duration>,

    /// null, with --service-time: requests served at once (default 1).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub service_concurrency: Option<u32>,
}

/// The injected service time as run.json records it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct NullServiceRecord {
    pub service_time_us: u64,
    pub service_concurrency: usize,
    /// concurrency / time: the most requests per second the target completes.
    pub capacity_ops_s: f64,
}

impl NullServiceRecord {
    pub fn model(&self) -> ServiceModel {
        ServiceModel {
            time: std::time::Duration::from_micros(self.service_time_us),
            concurrency: self.service_concurrency,
        }
    }
}

/// Checks the service-time options (null only, a time of at least 1 µs) and records them.
pub fn service_record(args: &RunArgs) -> Result<Option<NullServiceRecord>, String> {
    let s = &args.null_service;
    if s.service_time.is_none() && s.service_concurrency.is_none() {
        return Ok(None);
    }
    if args.load.target != TargetKind::Null {
        return Err("--service-time and --service-concurrency apply only to --target null".into());
    }
    let Some(time) = s.service_time.filter(|t| t.as_micros() >= 1) else {
        return Err(
            "--service-concurrency needs --service-time, at least 1us (e.g. --service-time 10ms)"
                .into(),
        );
    };
    let model = ServiceModel {
        time,
        concurrency: s.service_concurrency.unwrap_or(1) as usize,
    };
    Ok(Some(NullServiceRecord {
        service_time_us: time.as_micros() as u64,
        service_concurrency: model.concurrency,
        capacity_ops_s: model.capacity(),
    }))
}

fn prepare<'a>(config: &'a RunConfig, _: &'a Path) -> BoxFuture<'a, anyhow::Result<ReadyTarget>> {
    async {
        let coordinator = Arc::new(match config.null_service {
            Some(service) => NullCoordinator::with_service(service.model()),
            None => NullCoordinator::new(),
        });
        let server_version = coordinator.server_version().await?;
        Ok(ReadyTarget {
            coordinator,
            cluster: None,
            server_version,
            etcd_security: EtcdSecurity::default(),
            zk_access: Default::default(),
        })
    }
    .boxed()
}

fn connect(_: ConnectOptions) -> BoxFuture<'static, anyhow::Result<Arc<dyn Coordinator>>> {
    async { Ok(Arc::new(NullCoordinator::new()) as Arc<dyn Coordinator>) }.boxed()
}
