//! Generates the server side of etcd's v3lock `Lock` and v3election `Election` gRPC
//! services. etcd-client's `build-server` feature exposes the etcdserverpb servers but not
//! these two, so they are described here in Rust with tonic-build's `manual` builder (no
//! .proto files); the request messages are hand-written in `src/pb.rs` and the response
//! messages are etcd-client's.

use tonic_build::manual::{Builder, Method, Service};

fn method(
    name: &str,
    route: &str,
    input: &str,
    output: &str,
) -> tonic_build::manual::MethodBuilder {
    Method::builder()
        .name(name)
        .route_name(route)
        .input_type(input)
        .output_type(output)
        .codec_path("tonic_prost::ProstCodec")
}

fn main() {
    let lock = Service::builder()
        .name("Lock")
        .package("v3lockpb")
        .method(
            method(
                "lock",
                "Lock",
                "crate::pb::LockRequest",
                "crate::pb::LockResponse",
            )
            .build(),
        )
        .method(
            method(
                "unlock",
                "Unlock",
                "crate::pb::UnlockRequest",
                "crate::pb::UnlockResponse",
            )
            .build(),
        )
        .build();
    let election = Service::builder()
        .name("Election")
        .package("v3electionpb")
        .method(
            method(
                "campaign",
                "Campaign",
                "crate::pb::CampaignRequest",
                "crate::pb::CampaignResponse",
            )
            .build(),
        )
        .method(
            method(
                "proclaim",
                "Proclaim",
                "crate::pb::ProclaimRequest",
                "crate::pb::ProclaimResponse",
            )
            .build(),
        )
        .method(
            method(
                "leader",
                "Leader",
                "crate::pb::LeaderRequest",
                "crate::pb::LeaderResponse",
            )
            .build(),
        )
        .method(
            method(
                "observe",
                "Observe",
                "crate::pb::LeaderRequest",
                "crate::pb::LeaderResponse",
            )
            .server_streaming()
            .build(),
        )
        .method(
            method(
                "resign",
                "Resign",
                "crate::pb::ResignRequest",
                "crate::pb::ResignResponse",
            )
            .build(),
        )
        .build();
    Builder::new()
        .build_client(false)
        .build_transport(false)
        .compile(&[lock, election]);
    println!("cargo:rerun-if-changed=build.rs");
}
