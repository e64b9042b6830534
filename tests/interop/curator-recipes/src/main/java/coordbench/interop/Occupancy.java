package coordbench.interop;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * Who is inside something that admits at most {@code limit} at once (a critical section,
 * leases, leadership), counted by the participants themselves: in when the recipe lets
 * them in, out before they give it up, so a count past the limit is one the server let in.
 */
final class Occupancy {
    private final int limit;
    private final AtomicInteger inside = new AtomicInteger();
    private final AtomicInteger most = new AtomicInteger();
    private final AtomicInteger overruns = new AtomicInteger();

    Occupancy(int limit) {
        this.limit = limit;
    }

    void enter() {
        int now = inside.incrementAndGet();
        most.accumulateAndGet(now, Math::max);
        if (now > limit) {
            overruns.incrementAndGet();
        }
    }

    void leave() {
        inside.decrementAndGet();
    }

    /** Times someone came in while {@code limit} were already inside. */
    int overruns() {
        return overruns.get();
    }

    /** The most inside at once. */
    int most() {
        return most.get();
    }
}
