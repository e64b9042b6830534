//! coordbench's vocabulary: what every other crate of the suite names things with, and
//! the conventions of the files it writes. It sits at the bottom of the workspace's layers
//! (see ARCHITECTURE.md) and has no async runtime: the kinds of a run ([`kinds`]), how a
//! command ends ([`outcome`]), the header every JSON record starts with ([`record`]) and its
//! schema identifiers ([`schema`]), how result files are written ([`files`]), sweep axes ([`axis`]),
//! release numbers ([`version`]), which percentiles a sample supports ([`tails`]) and when figures are too noisy
//! ([`noise`]), election timeout ranges ([`timeout_range`]), timestamps
//! ([`time`]), formatting ([`format`]), value parsers ([`parse`]) and located spec errors
//! ([`spec_error`]).

pub mod axis;
pub mod files;
pub mod format;
pub mod kinds;
pub mod noise;
pub mod outcome;
pub mod parse;
pub mod record;
pub mod schema;
pub mod spec_error;
pub mod tails;
pub mod time;
pub mod timeout_range;
pub mod version;
