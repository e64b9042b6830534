//! Bounded fuzzing of the `:authority` rewriter (see `coordbench_sim::fuzz`): header blocks
//! through the HPACK decoder, and whole client byte streams through the scanner. Besides
//! never panicking: a rewritten block decodes with nothing left to fix and moves the
//! dynamic table exactly as the original did (the server stays in step with the client),
//! and how the stream is cut into reads never changes what comes out.

use coordbench_sim::fuzz;

use super::tests::{authority_literal, frame, hex, scan};
use super::{Decoder, CONTINUATION, END_HEADERS, HEADERS, PADDED, PREFACE};

const CASES: u32 = 3_000;

/// Header blocks: RFC 7541's request examples and malformed authorities.
fn blocks() -> Vec<Vec<u8>> {
    let mut blocks = vec![
        hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"),
        hex("8286 84be 5886 a8eb 1064 9cbf"),
        hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf"),
        hex("3f e1 1f 8286"),
    ];
    for value in ["http://127.0.0.1:2379", "#initially=[http://a:1]", "ok:1"] {
        let mut b = hex("8286 84");
        b.extend(authority_literal(value));
        blocks.push(b);
    }
    blocks
}

#[test]
fn rewritten_blocks_need_no_fix_and_keep_the_table_in_step() {
    let sequences = proptest::collection::vec(fuzz::inputs(blocks()), 1..6);
    fuzz::run("hpack block", CASES, 0xa7_01, sequences, |blocks| {
        let (mut client, mut server) = (Decoder::default(), Decoder::default());
        for block in blocks {
            let Ok(fixed) = client.decode(&block) else {
                return;
            };
            let seen = server.decode(fixed.as_deref().unwrap_or(&block));
            assert!(
                matches!(seen, Ok(None)),
                "what goes to the server needs no fix"
            );
            assert_eq!(server.size, client.size, "dynamic tables in step");
        }
    });
}

/// Client streams: the preface, then HEADERS (padded, continued) and other frames.
fn streams() -> Vec<Vec<u8>> {
    let blocks = blocks();
    let settings = frame(0x4, 0, 0, &[]);
    let data = frame(0x0, 0x1, 1, b"hello");
    let mut padded = vec![2];
    padded.extend_from_slice(&blocks[4]);
    padded.extend_from_slice(&[0, 0]);
    let mut one = PREFACE.to_vec();
    one.extend(&settings);
    one.extend(frame(HEADERS, END_HEADERS, 1, &blocks[0]));
    one.extend(frame(HEADERS, PADDED | END_HEADERS, 3, &padded));
    one.extend(&data);
    let mut two = PREFACE.to_vec();
    two.extend(frame(HEADERS, 0, 1, &blocks[5][..4]));
    two.extend(frame(CONTINUATION, END_HEADERS, 1, &blocks[5][4..]));
    two.extend(frame(HEADERS, END_HEADERS, 3, &blocks[1]));
    vec![one, two]
}

#[test]
fn streams_scan_without_panics_however_they_are_cut() {
    let cases = (
        fuzz::inputs(streams()),
        proptest::collection::vec(1..64usize, 0..8),
    );
    fuzz::run("h2 stream", CASES, 0xa7_02, cases, |(stream, cuts)| {
        let whole = scan(&[&stream]);
        let mut pieces: Vec<&[u8]> = Vec::new();
        let mut rest = stream.as_slice();
        for cut in cuts {
            let (head, tail) = rest.split_at(cut.min(rest.len()));
            pieces.push(head);
            rest = tail;
        }
        pieces.push(rest);
        assert_eq!(scan(&pieces), whole, "the same output whatever the reads");
        if !stream.starts_with(PREFACE) && !PREFACE.starts_with(&stream) {
            assert_eq!(whole, stream, "not HTTP/2: passed through untouched");
        }
    });
}
