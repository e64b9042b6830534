//! Which keys a request touches and what it needs of them, checked against the auth
//! state: one set of rules for both places etcd checks, reads on the serving member before
//! it reads locally and writes at apply (so a permission revoked in between is seen on
//! every replica alike). As etcd: a range needs READ on its range; a put WRITE on its key
//! (READ too with `prev_kv`) and WRITE on every key already attached to its lease (whoever
//! cannot revoke a lease may not attach to it); a delete WRITE (and READ with `prev_kv`) on
//! its range; a txn READ on the range of each compare and what each op, nested txns
//! included, needs; revoking a lease WRITE on its keys, its time-to-live READ on them.

use crate::auth::{Access, AuthCommand, AuthError, AuthInfo};
use crate::command::Command;
use crate::store::KvStore;
use crate::types::{DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest};

impl KvStore {
    /// Whether `caller` may serve `req`.
    pub fn permit_range(
        &self,
        caller: Option<&AuthInfo>,
        req: &RangeRequest,
    ) -> Result<(), AuthError> {
        self.auth
            .check(caller, Access::Read, &req.key, &req.range_end)
    }

    /// Whether `caller` may run the txn: its compares and every op of either branch.
    pub fn permit_txn(&self, caller: Option<&AuthInfo>, t: &TxnRequest) -> Result<(), AuthError> {
        if !self.auth.enabled() {
            return Ok(());
        }
        for c in &t.compare {
            self.auth
                .check(caller, Access::Read, &c.key, &c.range_end)?;
        }
        for op in t.success.iter().chain(&t.failure) {
            match op {
                RequestOp::Range(r) => self.permit_range(caller, r)?,
                RequestOp::Put(p) => self.permit_put(caller, p)?,
                RequestOp::DeleteRange(d) => self.permit_delete(caller, d)?,
                RequestOp::Txn(nested) => self.permit_txn(caller, nested)?,
            }
        }
        Ok(())
    }

    /// Whether `caller` may `access` every key attached to lease `id` (none attached, or
    /// no such lease: yes).
    pub fn permit_lease(
        &self,
        caller: Option<&AuthInfo>,
        id: i64,
        access: Access,
    ) -> Result<(), AuthError> {
        if !self.auth.enabled() {
            return Ok(());
        }
        for key in self.lessor.keys(id).into_iter().flatten() {
            self.auth.check(caller, access, key, &[])?;
        }
        Ok(())
    }

    fn permit_put(&self, caller: Option<&AuthInfo>, p: &PutRequest) -> Result<(), AuthError> {
        self.auth.check(caller, Access::Write, &p.key, &[])?;
        if p.lease != 0 {
            self.permit_lease(caller, p.lease, Access::Write)?;
        }
        if p.prev_kv {
            self.auth.check(caller, Access::Read, &p.key, &[])?;
        }
        Ok(())
    }

    fn permit_delete(
        &self,
        caller: Option<&AuthInfo>,
        d: &DeleteRangeRequest,
    ) -> Result<(), AuthError> {
        self.auth
            .check(caller, Access::Write, &d.key, &d.range_end)?;
        if d.prev_kv {
            self.auth
                .check(caller, Access::Read, &d.key, &d.range_end)?;
        }
        Ok(())
    }

    /// The check at apply: what `cmd` needs of `caller` (`None`: sent without a user).
    pub(crate) fn permit_command(
        &self,
        caller: Option<&AuthInfo>,
        cmd: &Command,
    ) -> Result<(), AuthError> {
        if !self.auth.enabled() {
            return Ok(());
        }
        match cmd {
            Command::Put(p) => self.permit_put(caller, p),
            Command::DeleteRange(d) => self.permit_delete(caller, d),
            Command::Txn(t) => self.permit_txn(caller, t),
            Command::LeaseRevoke { id } => self.permit_lease(caller, *id, Access::Write),
            Command::Auth(a) if a.needs_admin() => self.auth.admin_permitted(caller),
            Command::Auth(AuthCommand::Authenticate { .. })
            | Command::Auth(_)
            | Command::Compact(_)
            | Command::LeaseGrant { .. }
            | Command::LeaseRenew { .. }
            | Command::LeaseRenewAll { .. }
            | Command::LeaseExpire { .. }
            | Command::LeaseCheckpoint { .. }
            | Command::As { .. } => Ok(()),
        }
    }
}
