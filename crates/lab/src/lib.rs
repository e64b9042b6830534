//! coordbench's cluster lab: everything between a run and the processes it measures.
//! [`install`] builds real servers into a cache, [`provision`] starts them (or the
//! built-in engines) as local clusters on the storage [`syncfs`] emulates, behind the
//! delay and partition proxy of [`netdelay`], with the election timing of
//! [`election_timing`]; [`affinity`] pins processes, [`resources`] samples their CPU and
//! memory, [`environment`] describes the machine, [`signals`] turns SIGINT/SIGTERM into a
//! cancellation and [`secret`] draws per-run credentials.

pub mod affinity;
pub mod cumulative;
pub mod election_timing;
pub mod environment;
pub mod install;
pub mod netdelay;
pub mod provision;
pub mod resources;
pub mod secret;
pub mod signals;
pub mod syncfs;
