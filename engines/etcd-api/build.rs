//! Generates the server side of etcd's v3lock `Lock`, v3election `Election` and
//! etcdserverpb `Auth` gRPC services. etcd-client's `build-server` feature exposes the
//! other etcdserverpb servers but not these (its Auth server's AuthStatus messages are not
//! exported, so its trait cannot be implemented), so they are described here in Rust with
//! tonic-build's `manual` builder (no .proto files). Messages are etcd-client's, except the
//! ones it does not export, hand-written in `src/pb.rs`.

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

/// etcdserverpb.Auth: (method, route, request, response); messages named by the type
/// etcd-client exports (`Pb...`) or by `crate::pb`.
const AUTH_METHODS: &[(&str, &str, &str, &str)] = &[
    (
        "auth_enable",
        "AuthEnable",
        "PbAuthEnableRequest",
        "PbAuthEnableResponse",
    ),
    (
        "auth_disable",
        "AuthDisable",
        "PbAuthDisableRequest",
        "PbAuthDisableResponse",
    ),
    (
        "auth_status",
        "AuthStatus",
        "crate::pb::AuthStatusRequest",
        "crate::pb::AuthStatusResponse",
    ),
    (
        "authenticate",
        "Authenticate",
        "PbAuthenticateRequest",
        "PbAuthenticateResponse",
    ),
    (
        "user_add",
        "UserAdd",
        "PbAuthUserAddRequest",
        "PbAuthUserAddResponse",
    ),
    (
        "user_get",
        "UserGet",
        "PbAuthUserGetRequest",
        "PbAuthUserGetResponse",
    ),
    (
        "user_list",
        "UserList",
        "PbAuthUserListRequest",
        "PbAuthUserListResponse",
    ),
    (
        "user_delete",
        "UserDelete",
        "PbAuthUserDeleteRequest",
        "PbAuthUserDeleteResponse",
    ),
    (
        "user_change_password",
        "UserChangePassword",
        "PbAuthUserChangePasswordRequest",
        "PbAuthUserChangePasswordResponse",
    ),
    (
        "user_grant_role",
        "UserGrantRole",
        "PbAuthUserGrantRoleRequest",
        "PbAuthUserGrantRoleResponse",
    ),
    (
        "user_revoke_role",
        "UserRevokeRole",
        "PbAuthUserRevokeRoleRequest",
        "PbAuthUserRevokeRoleResponse",
    ),
    (
        "role_add",
        "RoleAdd",
        "PbAuthRoleAddRequest",
        "PbAuthRoleAddResponse",
    ),
    (
        "role_get",
        "RoleGet",
        "PbAuthRoleGetRequest",
        "PbAuthRoleGetResponse",
    ),
    (
        "role_list",
        "RoleList",
        "PbAuthRoleListRequest",
        "PbAuthRoleListResponse",
    ),
    (
        "role_delete",
        "RoleDelete",
        "PbAuthRoleDeleteRequest",
        "PbAuthRoleDeleteResponse",
    ),
    (
        "role_grant_permission",
        "RoleGrantPermission",
        "PbAuthRoleGrantPermissionRequest",
        "PbAuthRoleGrantPermissionResponse",
    ),
    (
        "role_revoke_permission",
        "RoleRevokePermission",
        "PbAuthRoleRevokePermissionRequest",
        "PbAuthRoleRevokePermissionResponse",
    ),
];

fn auth_service() -> Service {
    let path = |t: &str| {
        if t.starts_with("crate::") {
            t.to_string()
        } else {
            format!("etcd_client::proto::{t}")
        }
    };
    AUTH_METHODS
        .iter()
        .fold(
            Service::builder().name("Auth").package("etcdserverpb"),
            |service, (name, route, input, output)| {
                service.method(method(name, route, &path(input), &path(output)).build())
            },
        )
        .build()
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
        .compile(&[lock, election, auth_service()]);
    println!("cargo:rerun-if-changed=build.rs");
}
