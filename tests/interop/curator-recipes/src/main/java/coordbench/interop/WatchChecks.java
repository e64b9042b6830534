package coordbench.interop;

import static coordbench.interop.Main.OP_SECONDS;
import static coordbench.interop.Main.await;
import static coordbench.interop.Main.bytes;
import static coordbench.interop.Main.client;
import static coordbench.interop.Main.fail;
import static coordbench.interop.Main.text;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.watch.PersistentWatcher;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;

/** CuratorCache and PersistentWatcher: what a client sees of another client's writes. */
final class WatchChecks {
    private WatchChecks() {}

    /** Events as "TYPE path[=data]", paths relative to the watched root, in arrival order. */
    static final class Events {
        private final List<String> seen = new ArrayList<>();

        synchronized void add(String event) {
            seen.add(event);
        }

        synchronized List<String> all() {
            return new ArrayList<>(seen);
        }

        synchronized int size() {
            return seen.size();
        }

        List<String> from(int start) {
            List<String> all = all();
            return all.subList(Math.min(start, all.size()), all.size());
        }

        /** Waits until the last event is {@code want}. */
        void waitFor(String want) throws InterruptedException {
            await("the event " + want + " (seen " + all() + ")", () -> {
                List<String> all = all();
                return !all.isEmpty() && all.get(all.size() - 1).equals(want);
            });
        }
    }

    static String relative(String root, String path) {
        return path.equals(root) ? "." : path.substring(root.length() + 1);
    }

    static final int BURST = 20;

    /**
     * A cache of a subtree sees what was there when it started, then every create, update
     * and delete of another client in order (each write waits for its event, so nothing
     * can coalesce), with the old data on deletes; a burst of updates arrives in order with
     * the last value; the cache's view ends equal to the server's.
     */
    static String cache(String base) throws Exception {
        CuratorFramework writer = client("cache-writer");
        CuratorFramework reader = client("cache-reader");
        String root = base + "/cache";
        writer.create().creatingParentsIfNeeded().forPath(root + "/pre", bytes("p"));
        Events events = new Events();
        CountDownLatch initialized = new CountDownLatch(1);
        CuratorCache cache = CuratorCache.build(reader, root);
        cache.listenable().addListener(CuratorCacheListener.builder()
                .forAll((type, old, data) -> {
                    ChildData d = type == CuratorCacheListener.Type.NODE_DELETED ? old : data;
                    events.add(type + " " + relative(root, d.getPath()) + "=" + text(d.getData()));
                })
                .forInitialized(initialized::countDown)
                .build());
        cache.start();
        try {
            if (!initialized.await(OP_SECONDS, TimeUnit.SECONDS)) {
                throw fail("the cache did not initialize within %ds (events: %s)", OP_SECONDS, events.all());
            }
            Set<String> initial = new TreeSet<>(events.all());
            Set<String> wantInitial = new TreeSet<>(List.of("NODE_CREATED .=", "NODE_CREATED pre=p"));
            if (!initial.equals(wantInitial) || events.size() != 2) {
                throw fail("the cache started with %s, want %s", events.all(), wantInitial);
            }
            stepByStep(writer, root, events);
            burst(writer, root, events);
            String view = cacheView(cache, root);
            String server = serverView(writer, root);
            if (!view.equals(server)) {
                throw fail("the cache holds %s, the server %s", view, server);
            }
        } finally {
            cache.close();
        }
        return String.format("initial content, then creates, updates and deletes in order; %d rapid updates arrived in order ending with the last; cache equals server",
                BURST);
    }

    private static void stepByStep(CuratorFramework writer, String root, Events events) throws Exception {
        int start = events.size();
        List<String> want = new ArrayList<>();
        record Step(String event, Write write) {}
        List<Step> steps = List.of(
                new Step("NODE_CREATED a=1", () -> writer.create().forPath(root + "/a", bytes("1"))),
                new Step("NODE_CHANGED a=2", () -> writer.setData().forPath(root + "/a", bytes("2"))),
                new Step("NODE_CREATED a/x=x", () -> writer.create().forPath(root + "/a/x", bytes("x"))),
                new Step("NODE_CHANGED a/x=y", () -> writer.setData().forPath(root + "/a/x", bytes("y"))),
                new Step("NODE_CHANGED .=r", () -> writer.setData().forPath(root, bytes("r"))),
                new Step("NODE_DELETED a/x=y", () -> writer.delete().forPath(root + "/a/x")),
                new Step("NODE_DELETED pre=p", () -> writer.delete().forPath(root + "/pre")),
                new Step("NODE_CHANGED a=3", () -> writer.setData().forPath(root + "/a", bytes("3"))));
        for (Step step : steps) {
            step.write().run();
            want.add(step.event());
            events.waitFor(step.event());
        }
        if (!events.from(start).equals(want)) {
            throw fail("the cache saw %s, want %s", events.from(start), want);
        }
    }

    interface Write {
        void run() throws Exception;
    }

    private static void burst(CuratorFramework writer, String root, Events events) throws Exception {
        int start = events.size();
        String path = root + "/b";
        writer.create().forPath(path, bytes("0"));
        for (int i = 1; i <= BURST; i++) {
            writer.setData().forPath(path, bytes(String.valueOf(i)));
        }
        events.waitFor("NODE_CHANGED b=" + BURST);
        writer.delete().forPath(path);
        events.waitFor("NODE_DELETED b=" + BURST);
        List<String> seen = events.from(start);
        if (!seen.get(0).startsWith("NODE_CREATED b=")) {
            throw fail("the burst began with %s, want NODE_CREATED b", seen.get(0));
        }
        int last = Integer.parseInt(seen.get(0).substring("NODE_CREATED b=".length()));
        for (String e : seen.subList(1, seen.size() - 1)) {
            if (!e.startsWith("NODE_CHANGED b=")) {
                throw fail("during the burst the cache saw %s (all: %s)", e, seen);
            }
            int v = Integer.parseInt(e.substring("NODE_CHANGED b=".length()));
            if (v <= last) {
                throw fail("the burst's updates arrived out of order: %s", seen);
            }
            last = v;
        }
    }

    private static String cacheView(CuratorCache cache, String root) {
        Set<String> nodes = new TreeSet<>();
        cache.stream().forEach(d -> nodes.add(relative(root, d.getPath()) + "=" + text(d.getData())));
        return nodes.toString();
    }

    private static String serverView(CuratorFramework c, String root) throws Exception {
        Set<String> nodes = new TreeSet<>();
        List<String> todo = new ArrayList<>(List.of(root));
        while (!todo.isEmpty()) {
            String path = todo.remove(todo.size() - 1);
            nodes.add(relative(root, path) + "=" + text(c.getData().forPath(path)));
            for (String child : c.getChildren().forPath(path)) {
                todo.add(path + "/" + child);
            }
        }
        return nodes.toString();
    }

    /**
     * A recursive persistent watch sees every event under its path, in order, from a burst
     * of another client's writes, and stays set; a non-recursive one sees its node's data
     * and children changes but nothing deeper; a closed one sees nothing more.
     */
    static String persistentWatcher(String base) throws Exception {
        CuratorFramework writer = client("watch-writer");
        CuratorFramework reader = client("watch-reader");
        String root = base + "/tree";
        String flat = base + "/flat";
        writer.create().creatingParentsIfNeeded().forPath(root);
        writer.create().creatingParentsIfNeeded().forPath(flat);
        Events deep = new Events();
        Events shallow = new Events();
        PersistentWatcher recursive = watcher(reader, root, true, deep);
        PersistentWatcher children = watcher(reader, flat, false, shallow);
        try {
            writer.create().forPath(root + "/a");
            writer.create().forPath(root + "/a/b", bytes("1"));
            writer.setData().forPath(root + "/a/b", bytes("2"));
            writer.delete().forPath(root + "/a/b");
            writer.setData().forPath(root, bytes("z"));
            writer.create().forPath(root + "/c");
            writer.delete().forPath(root + "/c");
            writer.delete().forPath(root + "/a");
            List<String> wantDeep = List.of("NodeCreated a", "NodeCreated a/b", "NodeDataChanged a/b", "NodeDeleted a/b",
                    "NodeDataChanged .", "NodeCreated c", "NodeDeleted c", "NodeDeleted a");
            writer.create().forPath(flat + "/a");
            writer.create().forPath(flat + "/a/b");
            writer.setData().forPath(flat + "/a", bytes("1"));
            writer.setData().forPath(flat, bytes("1"));
            writer.delete().forPath(flat + "/a/b");
            writer.delete().forPath(flat + "/a");
            List<String> wantShallow = List.of("NodeChildrenChanged .", "NodeDataChanged .", "NodeChildrenChanged .");
            deep.waitFor(wantDeep.get(wantDeep.size() - 1));
            shallow.waitFor(wantShallow.get(wantShallow.size() - 1));
            // A write after the others: by the time its event arrives, any stray event of
            // the earlier ones has too.
            writer.setData().forPath(root, bytes("end"));
            deep.waitFor("NodeDataChanged .");
            if (!deep.all().equals(concat(wantDeep, "NodeDataChanged ."))) {
                throw fail("the recursive watch saw %s, want %s", deep.all(), concat(wantDeep, "NodeDataChanged ."));
            }
            if (!shallow.all().equals(wantShallow)) {
                throw fail("the non-recursive watch saw %s, want %s", shallow.all(), wantShallow);
            }
        } finally {
            children.close();
        }
        // Closed: the watch is removed from the server (removeWatches) and sees nothing more.
        recursive.close();
        int before = deep.size();
        Thread.sleep(500);
        writer.create().forPath(root + "/after-close");
        writer.setData().forPath(flat, bytes("after-close"));
        Thread.sleep(500);
        if (deep.size() != before || shallow.size() != 3) {
            throw fail("closed persistent watchers still saw %s and %s", deep.from(before), shallow.from(3));
        }
        return "recursive: all 9 events under the path in order; non-recursive: its own data and children changes only; none after close";
    }

    private static List<String> concat(List<String> list, String last) {
        List<String> all = new ArrayList<>(list);
        all.add(last);
        return all;
    }

    /** A started persistent watcher recording into {@code events}, once the server has set it. */
    private static PersistentWatcher watcher(CuratorFramework c, String path, boolean recursive, Events events)
            throws Exception {
        PersistentWatcher w = new PersistentWatcher(c, path, recursive);
        CountDownLatch set = new CountDownLatch(1);
        w.getResetListenable().addListener(set::countDown);
        w.getListenable().addListener((WatchedEvent e) -> {
            if (e.getType() != Watcher.Event.EventType.None) {
                events.add(e.getType() + " " + relative(path, e.getPath()));
            }
        });
        w.start();
        if (!set.await(OP_SECONDS, TimeUnit.SECONDS)) {
            throw fail("the persistent watch on %s was not set within %ds", path, OP_SECONDS);
        }
        return w;
    }
}
