//! Attaching to a cluster the user runs (`--endpoints`), the client library for ZooKeeper
//! (`--zk-client`), the access options of each API (credentials, ACLs, TLS: the
//! `*_access` modules own them) and `--secure`, with their checks: what an attached or
//! secured run can do, and what zookeeper-async cannot.

use clap::Args;
use coordbench_drivers::{zookeeper_async, ApiFamily};
use coordbench_results::kinds::{
    value_name, ConsistencyArg, TargetKind, WorkloadKind, ZkClientArg,
};

use super::load::LoadOptions;
use crate::etcd_access::{self, ResolvedEtcdAccess};
use crate::zk_access::{self, ResolvedAccess};

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Attach and security")]
pub struct AttachOptions {
    /// Attach to a running cluster instead of starting one (host:port,...).
    #[arg(long, value_delimiter = ',')]
    pub endpoints: Vec<String>,

    /// zookeeper: the client library (default: client, the driver's own; async:
    /// zookeeper-async).
    #[arg(long, value_enum)]
    pub zk_client: Option<ZkClientArg>,

    /// zookeeper, zab: credentials, node ACLs and chroot.
    #[command(flatten)]
    pub zk_access: zk_access::ZkAccessArgs,

    /// TLS to clusters you run: etcd and raft over https://, ZooKeeper and zab on their
    /// secure client port.
    #[command(flatten)]
    pub tls: crate::tls_access::TlsArgs,

    /// etcd: the user for clusters you run.
    #[command(flatten)]
    pub etcd_access: etcd_access::EtcdAccessArgs,

    /// Start the cluster secured: zookeeper and zab serve clients over TLS only (the
    /// secure client port, client certificates signed by a CA generated per run required)
    /// and require digest auth from every client (a user and password drawn per run,
    /// CREATOR_ALL on every node the workloads create); etcd serves clients over TLS only, requires client certificates signed by
    /// a CA generated per run and has auth enabled (the driver runs as a user drawn per
    /// run); raft serves TLS and requires client certificates (no auth: the engine has no
    /// auth API). `--secure false` is the default.
    #[arg(long, num_args = 0..=1, default_value_t = false, default_missing_value = "true",
          action = clap::ArgAction::Set, value_name = "BOOL")]
    pub secure: bool,
}

/// The access options resolved for each API: the drivers' credentials and TLS, and their
/// records.
#[derive(Debug, Clone)]
pub struct Access {
    pub zk: ResolvedAccess,
    pub etcd: ResolvedEtcdAccess,
}

impl AttachOptions {
    /// `--endpoints`: a cluster the user runs.
    pub fn attached(&self) -> bool {
        !self.endpoints.is_empty()
    }

    /// A target without servers has nothing to attach to.
    pub fn check_endpoints(&self, target: TargetKind) -> Result<(), String> {
        let target = crate::targets::descriptor(target);
        if !target.has_servers && self.attached() {
            return Err(format!(
                "--endpoints cannot be used with --target {}",
                target.name
            ));
        }
        Ok(())
    }

    /// `--zk-client`: the ZooKeeper client library, and what zookeeper-async cannot do
    /// (the workloads that recognise their own nodes or keep watches, linearizable reads,
    /// short session timeouts).
    pub fn zk_client(
        &self,
        load: &LoadOptions,
        consistency: ConsistencyArg,
    ) -> Result<ZkClientArg, String> {
        if load.family() != ApiFamily::ZooKeeper && self.zk_client.is_some() {
            return Err("--zk-client applies only to --target zookeeper".into());
        }
        let kind = self.zk_client.unwrap_or_default();
        if kind != ZkClientArg::Async {
            return Ok(kind);
        }
        if matches!(
            load.workload,
            WorkloadKind::Election
                | WorkloadKind::Discovery
                | WorkloadKind::ConfigWatch
                | WorkloadKind::Register
                | WorkloadKind::Barrier
        ) {
            return Err(format!(
                "--zk-client async runs only the kv and lock workloads (zookeeper-async has no session id to recognise its own nodes and drops watches on reconnect); omit --zk-client for --workload {}",
                value_name(load.workload)
            ));
        }
        if matches!(load.workload, WorkloadKind::KvGet | WorkloadKind::KvMixed)
            && consistency != ConsistencyArg::Serializable
        {
            return Err(
                "--zk-client async reads only serializably (zookeeper-async has no sync() and no multi); use --consistency serializable".into(),
            );
        }
        if load.ttl < zookeeper_async::MIN_SESSION_TIMEOUT {
            return Err(
                "--zk-client async needs --ttl 1500ms or more (below it zookeeper-async's read deadline is zero and it reconnects endlessly)".into(),
            );
        }
        Ok(kind)
    }

    /// `--secure` starts a secured cluster, so it needs one coordbench starts.
    pub fn check_secure(&self, target: TargetKind) -> Result<(), String> {
        if !self.secure {
            return Ok(());
        }
        let target = crate::targets::descriptor(target);
        match target.family {
            _ if !target.has_servers => Err(format!(
                "--secure applies to clusters coordbench starts; omit it with --target {}",
                target.name
            )),
            ApiFamily::Etcd if self.attached() => Err(
                "--secure starts a secured cluster; against --endpoints pass --cacert, --cert, --key (and --user for etcd) instead".into(),
            ),
            _ if self.attached() => Err(
                "--secure starts a secured cluster; against --endpoints pass --zk-auth (and --zk-acl creator; --cacert, --cert, --key for a secure client port) instead".into(),
            ),
            _ => Ok(()),
        }
    }

    /// The access options of both APIs checked against the target, the endpoints and
    /// `--secure`, with the passwords from their environment variables.
    pub fn access(&self, target: TargetKind, zk_client: ZkClientArg) -> Result<Access, String> {
        let zk = zk_access::resolve(
            &self.zk_access,
            &self.tls,
            target,
            zk_client,
            self.secure,
            std::env::var(zk_access::PASSWORD_ENV).ok(),
        )?;
        let etcd = etcd_access::resolve(
            &self.etcd_access,
            &self.tls,
            target,
            &self.endpoints,
            self.secure,
            std::env::var(etcd_access::PASSWORD_ENV).ok(),
        )?;
        Ok(Access { zk, etcd })
    }
}
