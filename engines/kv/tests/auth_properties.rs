//! Seeded property test of auth as replicated state: kv commands sent as random users
//! (or none) mixed with random auth changes (users, roles, grants and revocations over the
//! test's small key space, enable and disable). Two replicas fed the encoded and decoded
//! commands agree on every result, and a replica restored from a snapshot taken at a random
//! point (auth section included) continues exactly like the one that never stopped: the
//! same refusals, the same auth state, byte-identical snapshots.

mod common;

use common::*;
use coordbench_kv::auth::{AuthCommand, AuthInfo, PermType, Permission, ROOT};
use coordbench_kv::*;

const SEEDS: u64 = 32;
const STEPS: usize = 400;
const USERS: &[&str] = &[ROOT, "u1", "u2"];
const ROLES: &[&str] = &[ROOT, "r1", "r2"];

fn auth_command(rng: &mut Rng) -> AuthCommand {
    let name = rng.pick(USERS).to_string();
    let role = rng.pick(ROLES).to_string();
    match rng.below(10) {
        0 => AuthCommand::UserAdd {
            name,
            password_hash: Some("hash".into()),
        },
        1 | 2 => AuthCommand::UserGrantRole { name, role },
        3 => AuthCommand::UserRevokeRole { name, role },
        4 => AuthCommand::RoleAdd { name: role },
        5 | 6 => {
            let key = key(rng);
            let perm = Permission {
                perm_type: *rng.pick(&[PermType::Read, PermType::Write, PermType::ReadWrite]),
                range_end: range_end(rng, &key),
                key,
            };
            AuthCommand::RoleGrantPermission { name: role, perm }
        }
        7 => AuthCommand::RoleRevokePermission {
            name: role,
            key: key(rng),
            range_end: Vec::new(),
        },
        8 if rng.chance(70) => AuthCommand::Enable,
        8 => AuthCommand::Disable,
        _ if rng.chance(50) => AuthCommand::UserDelete { name },
        _ => AuthCommand::RoleDelete { name: role },
    }
}

/// A command of the kv generator or an auth change, sent by a random user most of the
/// time (at the store's auth revision, or one behind).
fn command_with_auth(rng: &mut Rng, store: &KvStore, now: &mut u64) -> Command {
    let cmd = if rng.chance(15) {
        Command::Auth(auth_command(rng))
    } else {
        command(rng, store, now)
    };
    if rng.chance(25) {
        return cmd;
    }
    let revision = store.auth().revision() - u64::from(rng.chance(5));
    Command::As {
        caller: AuthInfo {
            user: rng.pick(USERS).to_string(),
            revision,
        },
        command: Box::new(cmd),
    }
}

#[test]
fn auth_state_is_replicated_and_survives_snapshots() {
    let mut enabled_steps = 0;
    let mut refused = 0;
    for seed in 0..SEEDS {
        let mut rng = Rng::new(7000 + seed);
        let (mut a, mut b) = (KvStore::new(), KvStore::new());
        let cut = 50 + rng.below(STEPS as u64 - 100) as usize;
        let mut now = 0;
        for i in 0..STEPS {
            if i == cut {
                let snap = a.snapshot();
                b = KvStore::from_snapshot(&snap).unwrap();
                assert_eq!(b.snapshot(), snap, "seed {seed}");
                assert_eq!(b.auth(), a.auth(), "seed {seed}");
            }
            let cmd = command_with_auth(&mut rng, &a, &mut now);
            let decoded = Command::decode(&cmd.encode()).unwrap();
            assert_eq!(decoded, cmd);
            let index = i as u64 + 1;
            let ra = a.apply(index, &cmd);
            let rb = b.apply(index, &decoded);
            assert_eq!(ra, rb, "seed {seed} step {i}: {cmd:?}");
            enabled_steps += usize::from(a.auth().enabled());
            refused += usize::from(matches!(ra.result, Err(KvError::Auth(_))));
        }
        assert_eq!(a.snapshot(), b.snapshot(), "seed {seed}");
        assert_eq!(a.auth(), b.auth(), "seed {seed}");
    }
    // The generator reaches the interesting states: auth on, and requests refused by it.
    assert!(
        enabled_steps > 500,
        "auth was enabled for {enabled_steps} steps"
    );
    assert!(refused > 100, "{refused} requests refused by auth");
}
