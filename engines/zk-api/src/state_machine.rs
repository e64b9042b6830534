//! [`TreeStateMachine`]: the tree as the runtime's [`StateMachine`], with the watch
//! router fed from every apply.

use std::sync::Arc;

use coordbench_node::StateMachine;
use coordbench_tree::{Applied, CodecError, Command, DataTree};

use crate::router::Router;

/// What applying one log entry yields: the tree's [`Applied`], or the decode error of an
/// entry that is not a tree command (identical on every replica).
pub type ApplyOutput = Result<Applied, CodecError>;

/// ZooKeeper's data model of one member: its [`DataTree`] and its clients' connections.
#[derive(Default)]
pub struct TreeStateMachine {
    tree: DataTree,
    router: Arc<Router>,
}

impl TreeStateMachine {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn tree(&self) -> &DataTree {
        &self.tree
    }

    /// The router; the server registers its connections and watches here.
    pub fn router(&self) -> &Arc<Router> {
        &self.router
    }
}

impl StateMachine for TreeStateMachine {
    type Output = ApplyOutput;

    /// `index` is the command's zxid (a Raft log index, or a Zab zxid).
    fn apply(&mut self, index: u64, command: &[u8]) -> ApplyOutput {
        let command = Command::decode(command)?;
        let zxid = i64::try_from(index).unwrap_or(i64::MAX);
        let applied = self.tree.apply(zxid, &command);
        // Never blocks: a full connection queue closes that connection instead.
        self.router.dispatch(&applied);
        Ok(applied)
    }

    fn snapshot(&self) -> Vec<u8> {
        self.tree.snapshot()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        self.tree.restore(snapshot).map_err(|e| e.to_string())?;
        self.router.close_all();
        Ok(())
    }
}
