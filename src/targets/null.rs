//! The in-process null target: a driver that does nothing, measuring the load generator.

use std::path::Path;
use std::sync::Arc;

use coordbench_drivers::etcd::EtcdSecurity;
use coordbench_drivers::null::NullCoordinator;
use coordbench_drivers::{ApiFamily, Coordinator};
use futures::future::BoxFuture;
use futures::FutureExt;

use super::{ConnectOptions, Descriptor, LeaderQuery, ReadyTarget};
use crate::cli::TargetKind;
use crate::config::RunConfig;

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
    prepare: prepare,
    connect: connect,
    probe: None,
};

fn prepare<'a>(_: &'a RunConfig, _: &'a Path) -> BoxFuture<'a, anyhow::Result<ReadyTarget>> {
    async {
        let coordinator = Arc::new(NullCoordinator::new());
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
