package coordbench.interop;

import static coordbench.interop.Main.OP_SECONDS;
import static coordbench.interop.Main.clients;
import static coordbench.interop.Main.eachClient;
import static coordbench.interop.Main.fail;

import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;

/** DistributedDoubleBarrier. */
final class BarrierChecks {
    private BarrierChecks() {}

    static final int MEMBERS = 4;
    static final int ROUNDS = 2;
    static final long STAGGER_MS = 80;

    /**
     * Members arrive at the barrier one after another: none gets through enter() before
     * every member has called it, and none gets through leave() before every member has
     * called it. With a member missing, enter() times out for the others.
     */
    static String barrier(String base) throws Exception {
        List<CuratorFramework> cs = clients("barrier", MEMBERS);
        for (int round = 0; round < ROUNDS; round++) {
            round(cs, base + "/round-" + round);
        }
        oneShort(cs, base + "/short");
        return String.format("%d members x %d rounds, arriving %d ms apart: nobody passed enter() or leave() before all %d had called it; one member short, enter() timed out",
                MEMBERS, ROUNDS, STAGGER_MS, MEMBERS);
    }

    /** One round. */
    private static void round(List<CuratorFramework> cs, String path) throws Exception {
        AtomicInteger entering = new AtomicInteger();
        AtomicInteger leaving = new AtomicInteger();
        eachClient(cs, (id, c) -> {
            DistributedDoubleBarrier barrier = new DistributedDoubleBarrier(c, path, MEMBERS);
            // Staggered arrivals: the early ones wait for the late ones.
            Thread.sleep(STAGGER_MS * id);
            pass(id, "enter", entering, () -> barrier.enter(OP_SECONDS, TimeUnit.SECONDS));
            Thread.sleep(STAGGER_MS * (MEMBERS - 1 - id));
            pass(id, "leave", leaving, () -> barrier.leave(OP_SECONDS, TimeUnit.SECONDS));
            return null;
        });
        List<String> left = cs.get(0).getChildren().forPath(path);
        if (!left.isEmpty()) {
            throw fail("nodes left under the barrier after everyone left: %s", left);
        }
    }

    /**
     * Member {@code id} calls {@code phase} (enter or leave), counted in {@code arrived}
     * first: it must get through, and only once every member has called it.
     */
    private static void pass(int id, String phase, AtomicInteger arrived, Callable<Boolean> call) throws Exception {
        arrived.incrementAndGet();
        if (!call.call()) {
            throw fail("member %d: %s() timed out after %ds with %d of %d members there", id, phase, OP_SECONDS,
                    arrived.get(), MEMBERS);
        }
        int there = arrived.get();
        if (there != MEMBERS) {
            throw fail("member %d passed %s() when only %d of %d members had called it", id, phase, there, MEMBERS);
        }
    }

    /** With one member missing, the others' enter() times out. */
    private static void oneShort(List<CuratorFramework> cs, String path) throws Exception {
        List<Boolean> entered = eachClient(cs.subList(0, MEMBERS - 1),
                (id, c) -> new DistributedDoubleBarrier(c, path, MEMBERS).enter(1500, TimeUnit.MILLISECONDS));
        if (entered.contains(true)) {
            throw fail("with %d of %d members, enter() let a member through: %s", MEMBERS - 1, MEMBERS, entered);
        }
    }
}
