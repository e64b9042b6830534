//! etcd's `Auth` service: users, roles, permissions, enabling auth, and Authenticate.
//!
//! Changes are [`AuthCommand`]s proposed as the calling user, so apply decides (on every
//! replica alike) whether that user may manage auth. Passwords are hashed here, on the
//! proposing member, with bcrypt as etcd hashes them (`ServeOptions::bcrypt_cost`, etcd's
//! default 10), so the log and snapshots hold hashes only. Authenticate checks the
//! password against the local hash, then proposes the authentication, whose apply makes
//! the token `<random>.<log index>` known to every member (see tokens.rs). Gets and lists
//! are read after a read barrier and need a root-role user while auth is on, as in etcd,
//! except that users may get themselves and the roles they hold.

use std::sync::Arc;

use coordbench_kv::auth::{AuthCommand, AuthError, AuthStore, PermType, Permission};
use coordbench_kv::{Command, Response as KvResponse};
use coordbench_node::Replicator;
use etcd_client::proto::{
    PbAuthDisableRequest, PbAuthDisableResponse, PbAuthEnableRequest, PbAuthEnableResponse,
    PbAuthRoleAddRequest, PbAuthRoleAddResponse, PbAuthRoleDeleteRequest, PbAuthRoleDeleteResponse,
    PbAuthRoleGetRequest, PbAuthRoleGetResponse, PbAuthRoleGrantPermissionRequest,
    PbAuthRoleGrantPermissionResponse, PbAuthRoleListRequest, PbAuthRoleListResponse,
    PbAuthRoleRevokePermissionRequest, PbAuthRoleRevokePermissionResponse, PbAuthUserAddRequest,
    PbAuthUserAddResponse, PbAuthUserChangePasswordRequest, PbAuthUserChangePasswordResponse,
    PbAuthUserDeleteRequest, PbAuthUserDeleteResponse, PbAuthUserGetRequest, PbAuthUserGetResponse,
    PbAuthUserGrantRoleRequest, PbAuthUserGrantRoleResponse, PbAuthUserListRequest,
    PbAuthUserListResponse, PbAuthUserRevokeRoleRequest, PbAuthUserRevokeRoleResponse,
    PbAuthenticateRequest, PbAuthenticateResponse, PbResponseHeader,
};
use etcd_client::PermissionType;
use rand::distr::{Alphabetic, SampleString};
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

use crate::core::{at_current, Core};
use crate::error::ApiError;
use crate::pb::auth::auth_server::Auth;
use crate::pb::{AuthStatusRequest, AuthStatusResponse};
use crate::state_machine::KvStateMachine;

/// Length of a simple token's random prefix (etcd's).
const TOKEN_PREFIX_LEN: usize = 16;

pub(crate) struct AuthService<R> {
    pub core: Arc<Core<R>>,
}

fn perm_type(t: PermType) -> PermissionType {
    match t {
        PermType::Read => PermissionType::Read,
        PermType::Write => PermissionType::Write,
        PermType::ReadWrite => PermissionType::Readwrite,
    }
}

impl<R: Replicator<KvStateMachine>> AuthService<R> {
    /// Proposes `cmd` as the request's user; the header and the token (if any) of its apply.
    async fn change(
        &self,
        metadata: &MetadataMap,
        cmd: AuthCommand,
    ) -> Result<(PbResponseHeader, String), ApiError> {
        let who = self.core.caller(metadata).await?;
        match self.core.propose(&who, Command::Auth(cmd)).await? {
            KvResponse::Auth { header, token } => {
                Ok((self.core.stamp().header(header.revision), token))
            }
            _ => Err(ApiError::Internal(
                "unexpected output for an auth command".into(),
            )),
        }
    }

    /// Like [`Self::change`], for answers that carry only the header.
    async fn header(
        &self,
        metadata: &MetadataMap,
        cmd: AuthCommand,
    ) -> Result<Option<PbResponseHeader>, Status> {
        Ok(Some(self.change(metadata, cmd).await?.0))
    }

    /// Reads the auth state after a read barrier, as a root-role user when auth is on, or
    /// as a user for whom `own` holds (the user's own record or role).
    async fn read<T>(
        &self,
        metadata: &MetadataMap,
        own: impl FnOnce(&AuthStore, &str) -> bool,
        f: impl FnOnce(&AuthStore) -> Result<T, AuthError>,
    ) -> Result<(Option<PbResponseHeader>, T), Status> {
        let who = self.core.caller(metadata).await?;
        self.core
            .replicator
            .read_barrier()
            .await
            .map_err(ApiError::from)?;
        let (revision, t) = self.core.replicator.read(|sm| {
            let store = sm.store();
            let auth = store.auth();
            let admin = auth.admin_permitted(at_current(&who, store).as_ref());
            if admin.is_err() && !who.as_ref().is_some_and(|c| own(auth, &c.user)) {
                admin?;
            }
            Ok::<_, ApiError>((store.revision(), f(auth)?))
        })?;
        Ok((Some(self.core.stamp().header(revision)), t))
    }

    /// bcrypt, off the async workers (a hash takes tens of milliseconds at cost 10).
    async fn hash(&self, password: String) -> Result<String, ApiError> {
        let cost = self.core.options.bcrypt_cost;
        tokio::task::spawn_blocking(move || bcrypt::hash(password, cost))
            .await
            .map_err(|e| ApiError::Internal(format!("password hashing: {e}")))?
            .map_err(|e| ApiError::InvalidArgument(format!("etcdserver: {e}")))
    }

    /// etcd's CheckPassword: auth on, the user known and given a password that matches.
    async fn check_password(&self, name: &str, password: String) -> Result<(), ApiError> {
        let hash = self.core.replicator.read(|sm| {
            let auth = sm.store().auth();
            if !auth.enabled() {
                return Err(AuthError::AuthNotEnabled);
            }
            let user = auth.user(name).ok_or(AuthError::AuthFailed)?;
            user.password_hash.clone().ok_or(AuthError::NoPasswordUser)
        })?;
        let matches = tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash))
            .await
            .map_err(|e| ApiError::Internal(format!("password check: {e}")))?;
        match matches {
            Ok(true) => Ok(()),
            _ => Err(AuthError::AuthFailed.into()),
        }
    }
}

#[tonic::async_trait]
impl<R: Replicator<KvStateMachine>> Auth for AuthService<R> {
    async fn auth_enable(
        &self,
        req: Request<PbAuthEnableRequest>,
    ) -> Result<Response<PbAuthEnableResponse>, Status> {
        let header = self.header(req.metadata(), AuthCommand::Enable).await?;
        Ok(Response::new(PbAuthEnableResponse { header }))
    }

    async fn auth_disable(
        &self,
        req: Request<PbAuthDisableRequest>,
    ) -> Result<Response<PbAuthDisableResponse>, Status> {
        let header = self.header(req.metadata(), AuthCommand::Disable).await?;
        Ok(Response::new(PbAuthDisableResponse { header }))
    }

    async fn auth_status(
        &self,
        req: Request<AuthStatusRequest>,
    ) -> Result<Response<AuthStatusResponse>, Status> {
        let (header, (enabled, auth_revision)) = self
            .read(
                req.metadata(),
                |_, _| false,
                |a| Ok((a.enabled(), a.revision())),
            )
            .await?;
        Ok(Response::new(AuthStatusResponse {
            header,
            enabled,
            auth_revision,
        }))
    }

    /// Not run as the request's user: a client re-authenticating may still send its
    /// expired token.
    async fn authenticate(
        &self,
        req: Request<PbAuthenticateRequest>,
    ) -> Result<Response<PbAuthenticateResponse>, Status> {
        let req = req.into_inner();
        self.check_password(&req.name, req.password).await?;
        let cmd = AuthCommand::Authenticate {
            name: req.name,
            token_prefix: Alphabetic.sample_string(&mut rand::rng(), TOKEN_PREFIX_LEN),
        };
        let (header, token) = self.change(&MetadataMap::new(), cmd).await?;
        Ok(Response::new(PbAuthenticateResponse {
            header: Some(header),
            token,
        }))
    }

    async fn user_add(
        &self,
        req: Request<PbAuthUserAddRequest>,
    ) -> Result<Response<PbAuthUserAddResponse>, Status> {
        let (metadata, _, r) = req.into_parts();
        let password_hash = if r.options.is_some_and(|o| o.no_password) {
            None
        } else if !r.hashed_password.is_empty() {
            Some(r.hashed_password)
        } else {
            Some(self.hash(r.password).await?)
        };
        let cmd = AuthCommand::UserAdd {
            name: r.name,
            password_hash,
        };
        let header = self.header(&metadata, cmd).await?;
        Ok(Response::new(PbAuthUserAddResponse { header }))
    }

    async fn user_get(
        &self,
        req: Request<PbAuthUserGetRequest>,
    ) -> Result<Response<PbAuthUserGetResponse>, Status> {
        let name = &req.get_ref().name;
        let (header, roles) = self
            .read(
                req.metadata(),
                |_, caller| caller == name,
                |a| {
                    let user = a.user(name).ok_or(AuthError::UserNotFound)?;
                    Ok(user.roles.clone())
                },
            )
            .await?;
        Ok(Response::new(PbAuthUserGetResponse { header, roles }))
    }

    async fn user_list(
        &self,
        req: Request<PbAuthUserListRequest>,
    ) -> Result<Response<PbAuthUserListResponse>, Status> {
        let (header, users) = self
            .read(req.metadata(), |_, _| false, |a| Ok(a.user_names()))
            .await?;
        Ok(Response::new(PbAuthUserListResponse { header, users }))
    }

    async fn user_delete(
        &self,
        req: Request<PbAuthUserDeleteRequest>,
    ) -> Result<Response<PbAuthUserDeleteResponse>, Status> {
        let cmd = AuthCommand::UserDelete {
            name: req.get_ref().name.clone(),
        };
        let header = self.header(req.metadata(), cmd).await?;
        Ok(Response::new(PbAuthUserDeleteResponse { header }))
    }

    async fn user_change_password(
        &self,
        req: Request<PbAuthUserChangePasswordRequest>,
    ) -> Result<Response<PbAuthUserChangePasswordResponse>, Status> {
        let (metadata, _, r) = req.into_parts();
        let password_hash = if r.hashed_password.is_empty() {
            self.hash(r.password).await?
        } else {
            r.hashed_password
        };
        let cmd = AuthCommand::UserChangePassword {
            name: r.name,
            password_hash: Some(password_hash),
        };
        let header = self.header(&metadata, cmd).await?;
        Ok(Response::new(PbAuthUserChangePasswordResponse { header }))
    }

    async fn user_grant_role(
        &self,
        req: Request<PbAuthUserGrantRoleRequest>,
    ) -> Result<Response<PbAuthUserGrantRoleResponse>, Status> {
        let r = req.get_ref();
        let cmd = AuthCommand::UserGrantRole {
            name: r.user.clone(),
            role: r.role.clone(),
        };
        let header = self.header(req.metadata(), cmd).await?;
        Ok(Response::new(PbAuthUserGrantRoleResponse { header }))
    }

    async fn user_revoke_role(
        &self,
        req: Request<PbAuthUserRevokeRoleRequest>,
    ) -> Result<Response<PbAuthUserRevokeRoleResponse>, Status> {
        let r = req.get_ref();
        let cmd = AuthCommand::UserRevokeRole {
            name: r.name.clone(),
            role: r.role.clone(),
        };
        let header = self.header(req.metadata(), cmd).await?;
        Ok(Response::new(PbAuthUserRevokeRoleResponse { header }))
    }

    async fn role_add(
        &self,
        req: Request<PbAuthRoleAddRequest>,
    ) -> Result<Response<PbAuthRoleAddResponse>, Status> {
        let cmd = AuthCommand::RoleAdd {
            name: req.get_ref().name.clone(),
        };
        let header = self.header(req.metadata(), cmd).await?;
        Ok(Response::new(PbAuthRoleAddResponse { header }))
    }

    async fn role_get(
        &self,
        req: Request<PbAuthRoleGetRequest>,
    ) -> Result<Response<PbAuthRoleGetResponse>, Status> {
        let name = &req.get_ref().role;
        let holds = |a: &AuthStore, caller: &str| {
            a.user(caller)
                .is_some_and(|u| u.roles.iter().any(|r| r == name))
        };
        let (header, perms) = self
            .read(req.metadata(), holds, |a| {
                let role = a.role(name).ok_or(AuthError::RoleNotFound)?;
                Ok(role.perms.clone())
            })
            .await?;
        let perm = perms
            .into_iter()
            .map(|p| {
                etcd_client::Permission::new(perm_type(p.perm_type), p.key)
                    .with_range_end(p.range_end)
                    .into()
            })
            .collect();
        Ok(Response::new(PbAuthRoleGetResponse { header, perm }))
    }

    async fn role_list(
        &self,
        req: Request<PbAuthRoleListRequest>,
    ) -> Result<Response<PbAuthRoleListResponse>, Status> {
        let (header, roles) = self
            .read(req.metadata(), |_, _| false, |a| Ok(a.role_names()))
            .await?;
        Ok(Response::new(PbAuthRoleListResponse { header, roles }))
    }

    async fn role_delete(
        &self,
        req: Request<PbAuthRoleDeleteRequest>,
    ) -> Result<Response<PbAuthRoleDeleteResponse>, Status> {
        let cmd = AuthCommand::RoleDelete {
            name: req.get_ref().role.clone(),
        };
        let header = self.header(req.metadata(), cmd).await?;
        Ok(Response::new(PbAuthRoleDeleteResponse { header }))
    }

    async fn role_grant_permission(
        &self,
        req: Request<PbAuthRoleGrantPermissionRequest>,
    ) -> Result<Response<PbAuthRoleGrantPermissionResponse>, Status> {
        let r = req.get_ref();
        let perm = r
            .perm
            .as_ref()
            .ok_or(ApiError::from(AuthError::PermissionNotGiven))?;
        let perm_type = PermType::from_proto(perm.perm_type).ok_or_else(|| {
            ApiError::InvalidArgument(format!(
                "etcdserver: invalid permission type {}",
                perm.perm_type
            ))
        })?;
        let cmd = AuthCommand::RoleGrantPermission {
            name: r.name.clone(),
            perm: Permission {
                perm_type,
                key: perm.key.clone(),
                range_end: perm.range_end.clone(),
            },
        };
        let header = self.header(req.metadata(), cmd).await?;
        Ok(Response::new(PbAuthRoleGrantPermissionResponse { header }))
    }

    async fn role_revoke_permission(
        &self,
        req: Request<PbAuthRoleRevokePermissionRequest>,
    ) -> Result<Response<PbAuthRoleRevokePermissionResponse>, Status> {
        let r = req.get_ref();
        let cmd = AuthCommand::RoleRevokePermission {
            name: r.role.clone(),
            key: r.key.clone(),
            range_end: r.range_end.clone(),
        };
        let header = self.header(req.metadata(), cmd).await?;
        Ok(Response::new(PbAuthRoleRevokePermissionResponse { header }))
    }
}
