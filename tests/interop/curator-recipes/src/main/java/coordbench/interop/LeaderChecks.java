package coordbench.interop;

import static coordbench.interop.Main.OP_SECONDS;
import static coordbench.interop.Main.await;
import static coordbench.interop.Main.clients;
import static coordbench.interop.Main.fail;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.leader.Participant;

/**
 * LeaderLatch and LeaderSelector. "Exactly one leader" is an {@link Occupancy} of 1: a
 * participant counts itself in when the recipe tells it it leads and out before it gives
 * leadership up (closing its latch or selector, closing its client, returning from
 * takeLeadership).
 */
final class LeaderChecks {
    private LeaderChecks() {}

    static final int CANDIDATES = 3;

    /**
     * Three latches: one leads, every latch names it as leader, the others' await times out;
     * closing the leader's latch moves leadership to another, and so does closing the next
     * leader's client (its session).
     */
    static String latch(String base) throws Exception {
        List<CuratorFramework> cs = clients("latch", CANDIDATES);
        String path = base + "/latch";
        Occupancy leaders = new Occupancy(1);
        List<String> order = Collections.synchronizedList(new ArrayList<>());
        List<LeaderLatch> latches = new ArrayList<>();
        for (int i = 0; i < CANDIDATES; i++) {
            String id = "latch-" + i;
            LeaderLatch latch = new LeaderLatch(cs.get(i), path, id);
            latch.addListener(new LeaderLatchListener() {
                @Override
                public void isLeader() {
                    leaders.enter();
                    order.add(id);
                }

                @Override
                public void notLeader() {}
            });
            latches.add(latch);
        }
        for (LeaderLatch latch : latches) {
            latch.start();
        }
        List<LeaderLatch> running = new ArrayList<>(latches);
        LeaderLatch first = latchLeader(running, leaders);
        await("the first leader's isLeader callback", () -> order.size() == 1);
        for (LeaderLatch other : running) {
            if (other != first && other.await(200, TimeUnit.MILLISECONDS)) {
                throw fail("%s's await returned true while %s leads", other.getId(), first.getId());
            }
        }
        // Leadership moves when the leader closes its latch ...
        leaders.leave();
        first.close();
        running.remove(first);
        LeaderLatch second = latchLeader(running, leaders);
        await("the second leader's isLeader callback", () -> order.size() == 2);
        // ... and when the leader's session ends.
        leaders.leave();
        cs.get(latches.indexOf(second)).close();
        running.remove(second);
        LeaderLatch third = latchLeader(running, leaders);
        await("the third leader's isLeader callback", () -> order.size() == 3);
        if (leaders.overruns() > 0 || new HashSet<>(order).size() != CANDIDATES) {
            throw fail("leadership went %s with %d overruns; want each of %d latches once, one at a time",
                    order, leaders.overruns(), CANDIDATES);
        }
        third.close();
        return String.format("one leader at a time (%s; latch closed, then session closed), every latch named it, the others' await timed out",
                String.join(" -> ", order));
    }

    /** Waits for one of {@code running} to lead; checks that every one names it leader. */
    private static LeaderLatch latchLeader(List<LeaderLatch> running, Occupancy leaders)
            throws Exception {
        AtomicReference<LeaderLatch> leader = new AtomicReference<>();
        await("a latch of " + running.size() + " to lead", () -> {
            for (LeaderLatch l : running) {
                if (l.hasLeadership()) {
                    leader.set(l);
                    return true;
                }
            }
            return false;
        });
        LeaderLatch l = leader.get();
        int leading = 0;
        for (LeaderLatch other : running) {
            leading += other.hasLeadership() ? 1 : 0;
        }
        if (leading != 1 || leaders.overruns() > 0) {
            throw fail("%d latches have leadership at once (%d overruns counted)", leading, leaders.overruns());
        }
        for (LeaderLatch other : running) {
            Participant p = other.getLeader();
            if (!p.isLeader() || !p.getId().equals(l.getId())) {
                throw fail("%s names %s (isLeader %s) as leader while %s leads", other.getId(), p.getId(), p.isLeader(), l.getId());
            }
            if (other.getParticipants().size() != running.size()) {
                throw fail("%s sees %d participants, want %d", other.getId(), other.getParticipants().size(), running.size());
            }
        }
        return l;
    }

    static final int SELECTOR_TURNS = 9;

    /**
     * Three selectors that requeue: one leader at a time, and leadership goes round in
     * turn (a selector that requeues joins the back of the queue). Then three that hold
     * leadership until interrupted: closing the leader's selector moves leadership, and so
     * does closing the next leader's client.
     */
    static String selector(String base) throws Exception {
        String turns = rotation(base + "/rotation");
        String handover = handover(base + "/handover");
        return turns + "; " + handover;
    }

    private static String rotation(String path) throws Exception {
        List<CuratorFramework> cs = clients("selector", CANDIDATES);
        Occupancy leaders = new Occupancy(1);
        List<String> order = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch enough = new CountDownLatch(SELECTOR_TURNS);
        List<LeaderSelector> selectors = new ArrayList<>();
        for (int i = 0; i < CANDIDATES; i++) {
            String id = "selector-" + i;
            AtomicReference<LeaderSelector> self = new AtomicReference<>();
            LeaderSelector s = new LeaderSelector(cs.get(i), path, new LeaderSelectorListenerAdapter() {
                @Override
                public void takeLeadership(CuratorFramework client) throws Exception {
                    leaders.enter();
                    order.add(id);
                    // Every other selector is queued before this one gives leadership up,
                    // so the turns follow the queue.
                    await("all " + CANDIDATES + " selectors queued", () -> participants(self.get()) == CANDIDATES);
                    Thread.sleep(20);
                    leaders.leave();
                    enough.countDown();
                }
            });
            self.set(s);
            s.setId(id);
            s.autoRequeue();
            selectors.add(s);
        }
        for (LeaderSelector s : selectors) {
            s.start();
        }
        if (!enough.await(3 * OP_SECONDS, TimeUnit.SECONDS)) {
            throw fail("only %d turns of leadership within %ds: %s", order.size(), 3 * OP_SECONDS, order);
        }
        for (LeaderSelector s : selectors) {
            s.close();
        }
        List<String> turns = new ArrayList<>(order.subList(0, SELECTOR_TURNS));
        if (leaders.overruns() > 0) {
            throw fail("%d times a selector took leadership while another held it (turns %s)", leaders.overruns(), turns);
        }
        for (int k = CANDIDATES; k < turns.size(); k++) {
            if (!turns.get(k).equals(turns.get(k - CANDIDATES))) {
                throw fail("leadership did not go round in turn: %s", turns);
            }
        }
        if (new HashSet<>(turns.subList(0, CANDIDATES)).size() != CANDIDATES) {
            throw fail("not every selector led in the first %d turns: %s", CANDIDATES, turns);
        }
        return String.format("%d turns, one leader at a time, in turn (%s)", SELECTOR_TURNS,
                String.join(" ", turns.subList(0, CANDIDATES)) + " ...");
    }

    private static int participants(LeaderSelector s) {
        try {
            return s.getParticipants().size();
        } catch (Exception e) {
            return -1;
        }
    }

    private static String handover(String path) throws Exception {
        List<CuratorFramework> cs = clients("holder", CANDIDATES);
        Occupancy leaders = new Occupancy(1);
        AtomicReference<String> current = new AtomicReference<>();
        List<String> order = Collections.synchronizedList(new ArrayList<>());
        List<LeaderSelector> selectors = new ArrayList<>();
        for (int i = 0; i < CANDIDATES; i++) {
            String id = "holder-" + i;
            LeaderSelector s = new LeaderSelector(cs.get(i), path, new LeaderSelectorListenerAdapter() {
                @Override
                public void takeLeadership(CuratorFramework client) {
                    leaders.enter();
                    order.add(id);
                    current.set(id);
                    try {
                        Thread.sleep(Long.MAX_VALUE); // until interrupted: closed or session lost
                    } catch (InterruptedException e) {
                        // given up: return, and the selector releases its node
                    }
                }
            });
            s.setId(id);
            selectors.add(s);
        }
        for (LeaderSelector s : selectors) {
            s.start();
        }
        List<LeaderSelector> running = new ArrayList<>(selectors);
        LeaderSelector first = selectorLeader(running, current);
        leaders.leave();
        first.close();
        running.remove(first);
        LeaderSelector second = selectorLeader(running, current);
        leaders.leave();
        cs.get(selectors.indexOf(second)).close();
        running.remove(second);
        LeaderSelector third = selectorLeader(running, current);
        if (leaders.overruns() > 0 || order.size() != CANDIDATES) {
            throw fail("leadership went %s with %d overruns; want each of %d selectors once, one at a time",
                    order, leaders.overruns(), CANDIDATES);
        }
        leaders.leave();
        third.close();
        return String.format("held until given up: %s (selector closed, then session closed)", String.join(" -> ", order));
    }

    /** Waits for one of {@code running} to take leadership; every one names it leader. */
    private static LeaderSelector selectorLeader(List<LeaderSelector> running, AtomicReference<String> current)
            throws Exception {
        AtomicReference<LeaderSelector> leader = new AtomicReference<>();
        await("a selector of " + running.size() + " to take leadership", () -> {
            for (LeaderSelector s : running) {
                if (s.getId().equals(current.get()) && s.hasLeadership()) {
                    leader.set(s);
                    return true;
                }
            }
            return false;
        });
        LeaderSelector l = leader.get();
        for (LeaderSelector other : running) {
            if (other != l && other.hasLeadership()) {
                throw fail("%s and %s both have leadership", l.getId(), other.getId());
            }
            Participant p = other.getLeader();
            if (!p.getId().equals(l.getId())) {
                throw fail("%s names %s as leader while %s leads", other.getId(), p.getId(), l.getId());
            }
        }
        return l;
    }
}
