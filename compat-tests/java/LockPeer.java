/*
 * The Java lock peer: drives real Redisson from the lock-peer line protocol
 * (the peer protocol of compat-tests/src/main.rs: the same commands, replies and error kinds as the crate's
 * `lock-peer`), so the cross-language tests and the bench can put real Java threads beside the
 * crate. Each logical thread is a real Java thread (Redisson ties ownership to the thread id).
 *
 * One source for Redisson 3.52 and 4.7: it is compiled against the version it runs with
 * (build.sh). The non-reentrant locks (4.4+) are reached by reflection, so that it compiles
 * against 3.x, where they answer UNSUPPORTED; the group lock (3.38+) answers UNSUPPORTED where the
 * method is missing.
 *
 * What Redisson has no counterpart for answers `ERR UNSUPPORTED`: `lost`/`validms` (Redisson
 * tells a holder nothing), `--sharded-pubsub both`, `--tls-ca`.
 */

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.redisson.Redisson;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.ClusterServersConfig;
import org.redisson.config.Config;
import org.redisson.config.SentinelServersConfig;
import org.redisson.config.ShardedSubscriptionMode;

public final class LockPeer {
    private static final TimeUnit MS = TimeUnit.MILLISECONDS;
    private static final List<String> GLOBAL = Arrays.asList("id", "sleep", "await", "bench", "scale", "quit", "halt");
    private static final List<String> FAMILIES = Arrays.asList("fenced", "spin", "nrf", "nr", "f", "r", "w", "");
    private static final List<String> OPERATIONS = Arrays.asList(
            "lock", "trylock", "unlock", "forceunlock", "islocked", "holdcount", "held", "ttl", "token", "lost", "validms");
    private static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);

    private static RedissonClient client;

    private LockPeer() {}

    // ---------------------------------------------------------------------------------------
    // Output

    static void emit(String line) {
        synchronized (OUT) {
            OUT.println(line);
            OUT.flush();
        }
    }

    static String oneLine(String s) {
        return s == null ? "" : s.replace('\n', ' ').replace('\r', ' ');
    }

    // ---------------------------------------------------------------------------------------
    // Errors: a reply error is a kind word and a message.

    /** A command's failure with its protocol kind. */
    static final class Fail extends Exception {
        final String kind;

        Fail(String kind, String message) {
            super(message, null, false, false);
            this.kind = kind;
        }
    }

    static Fail invalid(String message) {
        return new Fail("INVALID", message);
    }

    static Fail unsupported(String message) {
        return new Fail("UNSUPPORTED", message);
    }

    /** The protocol's kind for anything Redisson (or the JVM) throws. */
    static Fail classify(Throwable e) {
        while ((e instanceof InvocationTargetException || e instanceof java.util.concurrent.CompletionException
                || e instanceof java.util.concurrent.ExecutionException) && e.getCause() != null) {
            e = e.getCause();
        }
        if (e instanceof Fail) {
            return (Fail) e;
        }
        String name = e.getClass().getSimpleName();
        String msg = name + ": " + oneLine(e.getMessage());
        String text = String.valueOf(e.getMessage());
        for (Throwable c = e.getCause(); c != null; c = c.getCause()) {
            text += " " + c.getMessage();
        }
        if (e instanceof IllegalMonitorStateException) {
            boolean reentry = text.contains("non-reentrant") || text.contains("NON_REENTRANT_REACQUIRE");
            return new Fail(reentry ? "REENTRY" : "NOT_HELD", msg);
        }
        if (text.contains("NON_REENTRANT_REACQUIRE")) {
            return new Fail("REENTRY", msg);
        }
        if (text.contains("WRONGTYPE")) {
            return new Fail("WRONG_TYPE", msg);
        }
        if (text.contains("NOPERM") || text.contains("NOAUTH") || text.contains("WRONGPASS")) {
            return new Fail("NO_PERMISSION", msg);
        }
        if (name.equals("NoSyncedSlavesException")) {
            return new Fail("NOT_REPLICATED", msg);
        }
        if (name.contains("Timeout")) {
            return new Fail("TIMEOUT", msg);
        }
        if (name.contains("Connection")) {
            return new Fail("CONNECTION", msg);
        }
        if (e instanceof UnsupportedOperationException || e instanceof LinkageError) {
            return new Fail("UNSUPPORTED", msg);
        }
        if (e instanceof NumberFormatException) {
            return new Fail("INVALID", msg);
        }
        if (name.startsWith("Redis")) {
            return new Fail("REDIS", msg);
        }
        return new Fail("JAVA", msg);
    }

    // ---------------------------------------------------------------------------------------
    // Arguments

    /** Word `i` as a number, or null when absent. */
    static Long number(String[] w, int i) throws Fail {
        if (i >= w.length) {
            return null;
        }
        try {
            return Long.parseLong(w[i]);
        } catch (NumberFormatException e) {
            throw invalid("not a number: " + w[i]);
        }
    }

    static long required(String[] w, int i, String what) throws Fail {
        Long n = number(w, i);
        if (n == null) {
            throw invalid("missing " + what);
        }
        return n;
    }

    static int intArg(long n) throws Fail {
        if (n < Integer.MIN_VALUE || n > Integer.MAX_VALUE) {
            throw invalid("out of range: " + n);
        }
        return (int) n;
    }

    // ---------------------------------------------------------------------------------------
    // Logical threads

    /** One logical thread: a real Java thread running its commands in order. */
    static final class Worker extends Thread {
        private final LinkedBlockingQueue<Object> jobs = new LinkedBlockingQueue<>();
        /** Lock handles of this thread, per (family, name); `rw` keeps one read-write lock per name. */
        private final Map<String, Object> handles = new HashMap<>();

        Worker(String name) {
            super(name);
            setDaemon(true);
        }

        void submit(Object job) {
            jobs.add(job);
        }

        @Override
        public void run() {
            while (true) {
                Object job;
                try {
                    job = jobs.take();
                } catch (InterruptedException e) {
                    return;
                }
                if (job instanceof CountDownLatch) {
                    ((CountDownLatch) job).countDown();
                    continue;
                }
                long started = System.nanoTime();
                String command;
                String reply;
                if (job instanceof Fail) {
                    command = ((Fail) job).getMessage();
                    reply = "ERR INVALID: input line is not valid UTF-8";
                } else {
                    String[] words = (String[]) job;
                    command = words[0];
                    try {
                        reply = "OK " + execute(words);
                    } catch (Throwable e) {
                        Fail f = classify(e);
                        reply = "ERR " + f.kind + ": " + oneLine(f.getMessage());
                    }
                }
                double elapsed = (System.nanoTime() - started) / 1e6;
                emit(String.format(Locale.ROOT, "%s %s %s elapsed_ms=%.3f at=%d",
                        getName(), command, reply, elapsed, System.currentTimeMillis()));
            }
        }

        String execute(String[] w) throws Exception {
            String command = w[0];
            switch (command) {
                case "threadid":
                    return Long.toString(Thread.currentThread().getId());
                case "lockname":
                    return client.getId() + ":" + Thread.currentThread().getId();
                case "sleep":
                    Long ms = number(w, 1);
                    Thread.sleep(Math.max(0, ms == null ? 0 : ms));
                    return "slept";
                case "glock":
                case "gtrylock":
                case "gunlock":
                    return group(w);
                default:
                    break;
            }
            if (command.startsWith("sem") || command.startsWith("psem") || command.startsWith("cdl")) {
                return Sync.execute(w);
            }
            String family = null;
            String op = null;
            for (String f : FAMILIES) {
                if (command.startsWith(f) && OPERATIONS.contains(command.substring(f.length()))) {
                    family = f;
                    op = command.substring(f.length());
                    break;
                }
            }
            if (family == null) {
                throw unsupported("unknown command " + command);
            }
            if (w.length < 2) {
                throw invalid("missing lock name");
            }
            RLock lock = lockFor(family, w[1]);
            return lockOperation(lock, family, op, w);
        }

        /** This thread's handle of a lock (one per family and name, as the crate's peer). */
        RLock lockFor(String family, String name) throws Exception {
            if (family.equals("r") || family.equals("w")) {
                RReadWriteLock rw = (RReadWriteLock) handles.computeIfAbsent("rw " + name, k -> client.getReadWriteLock(name));
                return family.equals("r") ? rw.readLock() : rw.writeLock();
            }
            String key = family + " " + name;
            Object have = handles.get(key);
            if (have != null) {
                return (RLock) have;
            }
            RLock lock;
            switch (family) {
                case "f":
                    lock = client.getFairLock(name);
                    break;
                case "fenced":
                    lock = client.getFencedLock(name);
                    break;
                case "spin":
                    lock = client.getSpinLock(name);
                    break;
                case "nr":
                    lock = byReflection("getNonReentrantLock", name);
                    break;
                case "nrf":
                    lock = byReflection("getNonReentrantFairLock", name);
                    break;
                default:
                    lock = client.getLock(name);
            }
            handles.put(key, lock);
            return lock;
        }

        String lockOperation(RLock l, String family, String op, String[] w) throws Exception {
            boolean fenced = family.equals("fenced");
            switch (op) {
                case "lock": {
                    Long lease = number(w, 2);
                    boolean leased = lease != null && lease > 0;
                    if (fenced) {
                        // Java's lockAndGetToken(lease) ignores the lease; a wait of -1 is
                        // "without limit" in tryLockAndGetToken and keeps it.
                        Long token = leased
                                ? ((RFencedLock) l).tryLockAndGetToken(-1, lease, MS)
                                : ((RFencedLock) l).lockAndGetToken();
                        return String.valueOf(token);
                    }
                    if (leased) {
                        l.lock(lease, MS);
                    } else {
                        l.lock();
                    }
                    return "locked";
                }
                case "trylock": {
                    Long wait = number(w, 2);
                    Long lease = number(w, 3);
                    boolean leased = lease != null && lease > 0;
                    if (fenced) {
                        RFencedLock f = (RFencedLock) l;
                        // Java's tryLockAndGetToken() waits without limit; one attempt is a wait of 0.
                        long waitMs = wait == null ? 0 : Math.max(0, wait);
                        Long token = leased ? f.tryLockAndGetToken(waitMs, lease, MS) : f.tryLockAndGetToken(waitMs, MS);
                        return token == null ? "null" : token.toString();
                    }
                    boolean got;
                    if (wait == null) {
                        got = l.tryLock();
                    } else if (leased) {
                        got = l.tryLock(wait, lease, MS);
                    } else {
                        got = l.tryLock(wait, MS);
                    }
                    return Boolean.toString(got);
                }
                case "unlock":
                    l.unlock();
                    return "unlocked";
                case "forceunlock":
                    return Boolean.toString(l.forceUnlock());
                case "islocked":
                    return Boolean.toString(l.isLocked());
                case "holdcount":
                    return Integer.toString(l.getHoldCount());
                case "held":
                    return Boolean.toString(l.isHeldByCurrentThread());
                case "ttl":
                    return Long.toString(l.remainTimeToLive());
                case "token":
                    if (!fenced) {
                        throw invalid("token is only defined for the fenced lock");
                    }
                    return String.valueOf(((RFencedLock) l).getToken());
                default:
                    // lost, validms
                    throw unsupported("Redisson has no loss signal: " + family + op);
            }
        }

        /** `glock <group> <values> [leaseMs]`, `gtrylock <group> <values> [waitMs [leaseMs]]`, `gunlock`. */
        String group(String[] w) throws Exception {
            if (w.length < 3) {
                throw invalid("usage: <op> <group> <values> [...]");
            }
            List<Object> values = new ArrayList<>();
            for (String v : w[2].split(",")) {
                if (!v.isEmpty()) {
                    values.add(v);
                }
            }
            if (values.isEmpty()) {
                throw invalid("no values");
            }
            String key = "g " + w[1] + " " + String.join(",", w[2]);
            RLock l = (RLock) handles.get(key);
            if (l == null) {
                try {
                    l = client.getMultiLock(w[1], values);
                } catch (LinkageError e) {
                    throw unsupported("this Redisson has no group lock (3.38+)");
                }
                handles.put(key, l);
            }
            switch (w[0]) {
                case "gunlock":
                    l.unlock();
                    return "unlocked";
                case "glock": {
                    Long lease = number(w, 3);
                    if (lease != null && lease > 0) {
                        l.lock(lease, MS);
                    } else {
                        l.lock();
                    }
                    return "locked";
                }
                default: {
                    Long wait = number(w, 3);
                    Long lease = number(w, 4);
                    if (wait == null) {
                        return Boolean.toString(l.tryLock());
                    }
                    if (lease != null && lease > 0) {
                        return Boolean.toString(l.tryLock(wait, lease, MS));
                    }
                    return Boolean.toString(l.tryLock(wait, MS));
                }
            }
        }
    }

    /** 4.4+'s non-reentrant locks, looked up at run time so that this compiles against 3.x. */
    static RLock byReflection(String factory, String name) throws Exception {
        try {
            return (RLock) RedissonClient.class.getMethod(factory, String.class).invoke(client, name);
        } catch (NoSuchMethodException e) {
            throw unsupported("Redisson " + version() + " has no " + factory + " (4.4+)");
        }
    }

    // ---------------------------------------------------------------------------------------
    // Synchronizers

    static final class Sync {
        static String execute(String[] w) throws Exception {
            String command = w[0];
            if (w.length < 2) {
                throw invalid("missing name");
            }
            String name = w[1];
            switch (command) {
                case "semsetpermits":
                    return Boolean.toString(sem(name).trySetPermits(intArg(required(w, 2, "permits"))));
                case "semacquire":
                    sem(name).acquire(permits(w, 2));
                    return "acquired";
                case "semtryacquire": {
                    int n = permits(w, 2);
                    Long wait = number(w, 3);
                    return Boolean.toString(wait == null ? sem(name).tryAcquire(n) : sem(name).tryAcquire(n, java.time.Duration.ofMillis(wait)));
                }
                case "semrelease":
                    sem(name).release(permits(w, 2));
                    return "released";
                case "semavailable":
                    return Integer.toString(sem(name).availablePermits());
                case "semdrain":
                    return Integer.toString(sem(name).drainPermits());
                case "semadd":
                    sem(name).addPermits(intArg(required(w, 2, "permits")));
                    return "added";
                case "psemsetpermits":
                    return Boolean.toString(psem(name).trySetPermits(intArg(required(w, 2, "permits"))));
                case "psemacquire": {
                    Long lease = number(w, 2);
                    return lease == null ? psem(name).acquire() : psem(name).acquire(lease, MS);
                }
                case "psemtryacquire": {
                    Long wait = number(w, 2);
                    Long lease = number(w, 3);
                    String id;
                    if (wait == null) {
                        // One attempt; with a lease that is a wait of 0.
                        id = lease == null ? psem(name).tryAcquire() : psem(name).tryAcquire(0, lease, MS);
                    } else {
                        id = lease == null ? psem(name).tryAcquire(wait, MS) : psem(name).tryAcquire(wait, lease, MS);
                    }
                    return id == null ? "null" : id;
                }
                case "psemrelease":
                    String id = permitId(w);
                    try {
                        psem(name).release(id);
                    } catch (RuntimeException e) {
                        // Unknown, released or expired: an IllegalArgumentException, wrapped in a
                        // RedisException by the synchronous API.
                        for (Throwable c = e; c != null; c = c.getCause()) {
                            if (c instanceof IllegalArgumentException) {
                                throw new Fail("NOT_HELD", oneLine(c.getMessage()));
                            }
                        }
                        throw e;
                    }
                    return "released";
                case "psemtryrelease":
                    return Boolean.toString(psem(name).tryRelease(permitId(w)));
                case "psemavailable":
                    return Integer.toString(psem(name).availablePermits());
                case "cdlsetcount":
                    return Boolean.toString(latch(name).trySetCount(required(w, 2, "count")));
                case "cdlcountdown":
                    latch(name).countDown();
                    return "ok";
                case "cdlcount":
                    return Long.toString(latch(name).getCount());
                case "cdlawait": {
                    Long wait = number(w, 2);
                    if (wait == null) {
                        latch(name).await();
                        return "true";
                    }
                    return Boolean.toString(latch(name).await(wait, MS));
                }
                default:
                    throw unsupported("unknown command " + command);
            }
        }

        static RSemaphore sem(String name) {
            return client.getSemaphore(name);
        }

        static RPermitExpirableSemaphore psem(String name) {
            return client.getPermitExpirableSemaphore(name);
        }

        static RCountDownLatch latch(String name) {
            return client.getCountDownLatch(name);
        }

        static int permits(String[] w, int i) throws Fail {
            Long n = number(w, i);
            return n == null ? 1 : intArg(n);
        }

        /** A permit id as the protocol prints it: 32 hexadecimal characters. */
        static String permitId(String[] w) throws Fail {
            if (w.length < 3) {
                throw invalid("missing permit id");
            }
            if (!w[2].matches("[0-9a-fA-F]{32}")) {
                throw invalid("not a permit id: " + w[2]);
            }
            return w[2].toLowerCase(Locale.ROOT);
        }
    }

    // ---------------------------------------------------------------------------------------
    // Scale: many holds, many waiters, churn on distinct lock names (the bench's scale rows; the
    // crate's side is compat-tests/src/scale_commands.rs). Holds are taken by Java threads with
    // lock(), as request threads would; waiters use the async API with an explicit thread id
    // each (ten thousand blocked platform threads would measure the JVM, not Redisson).

    /** A thread holding its share of `scale hold` until `scale release`, then unlocking it. */
    static final class Holder extends Thread {
        final List<String> names;
        final long leaseMs;
        final List<RLock> held = new ArrayList<>();
        final CountDownLatch acquired = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);
        final CountDownLatch released = new CountDownLatch(1);
        volatile Throwable failure;

        Holder(List<String> names, long leaseMs, int i) {
            super("scale-holder-" + i);
            this.names = names;
            this.leaseMs = leaseMs;
            setDaemon(true);
        }

        @Override
        public void run() {
            try {
                for (String name : names) {
                    RLock lock = client.getLock(name);
                    if (leaseMs > 0) {
                        lock.lock(leaseMs, MS);
                    } else {
                        lock.lock();
                    }
                    held.add(lock);
                }
            } catch (Throwable e) {
                failure = e;
            }
            acquired.countDown();
            try {
                release.await();
            } catch (InterruptedException e) {
                return;
            }
            for (RLock lock : held) {
                try {
                    lock.unlock();
                } catch (Throwable e) {
                    // Expired meanwhile (a watchdog that fell behind): nothing to release.
                }
            }
            released.countDown();
        }
    }

    static final List<Holder> HOLDERS = new ArrayList<>();
    /** Locks taken by `scale wait` waiters, with their thread ids. */
    static final List<RLock> WAITED_LOCKS = new ArrayList<>();
    static final List<Long> WAITED_IDS = new ArrayList<>();
    static final List<CompletableFuture<Boolean>> WAITERS = new ArrayList<>();
    static final AtomicLong FIRST_AT = new AtomicLong(Long.MAX_VALUE);
    static final AtomicLong LAST_AT = new AtomicLong(0);
    /** Explicit thread ids of waiters, far above any real thread's. */
    static final AtomicLong NEXT_ID = new AtomicLong(1L << 40);

    static String scale(String[] w) {
        String sub = w.length > 1 ? w[1] : "";
        try {
            switch (sub) {
                case "hold":
                    return "- scale OK " + scaleHold(w);
                case "release":
                    return "- scale OK " + scaleRelease();
                case "wait":
                    return "- scale OK " + scaleWait(w);
                case "waited":
                    return "- scale OK " + scaleWaited();
                case "churn":
                    return "- scale OK " + scaleChurn(w);
                case "stats":
                    throw unsupported("Redisson has no counters of its own state");
                default:
                    throw invalid("scale hold <count> <prefix> [tasks [leaseMs]] | scale release | "
                            + "scale wait <count> <prefix> <waitMs> | scale waited | "
                            + "scale churn <count> <prefix> [tasks] | scale stats");
            }
        } catch (Throwable e) {
            Fail f = classify(e);
            return "- scale ERR " + f.kind + ": " + oneLine(f.getMessage());
        }
    }

    static String scaleHold(String[] w) throws Exception {
        int count = intArg(required(w, 2, "count"));
        if (w.length < 4) {
            throw invalid("missing prefix");
        }
        String prefix = w[3];
        Long t = number(w, 4);
        int tasks = Math.max(1, t == null ? 16 : intArg(t));
        Long lease = number(w, 5);
        long started = System.nanoTime();
        List<Holder> mine = new ArrayList<>();
        for (int i = 0; i < tasks; i++) {
            List<String> names = new ArrayList<>();
            for (int n = i; n < count; n += tasks) {
                names.add(prefix + n);
            }
            Holder h = new Holder(names, lease == null ? 0 : lease, i);
            mine.add(h);
            h.start();
        }
        int held = 0;
        Throwable failure = null;
        for (Holder h : mine) {
            h.acquired.await();
            held += h.held.size();
            if (failure == null) {
                failure = h.failure;
            }
        }
        HOLDERS.addAll(mine);
        double took = (System.nanoTime() - started) / 1e9;
        if (failure != null) {
            Fail f = classify(failure);
            throw new Fail(f.kind, f.getMessage() + " (held " + held + ")");
        }
        return String.format(Locale.ROOT, "held=%d ms=%.0f per_s=%.0f", held, took * 1000, held / Math.max(took, 1e-9));
    }

    static String scaleRelease() throws Exception {
        long at = System.currentTimeMillis();
        long started = System.nanoTime();
        int released = 0;
        for (Holder h : HOLDERS) {
            h.release.countDown();
        }
        for (Holder h : HOLDERS) {
            h.released.await();
            released += h.held.size();
        }
        HOLDERS.clear();
        List<CompletableFuture<Void>> unlocks = new ArrayList<>();
        for (int i = 0; i < WAITED_LOCKS.size(); i++) {
            unlocks.add(WAITED_LOCKS.get(i).unlockAsync(WAITED_IDS.get(i)).toCompletableFuture());
        }
        for (CompletableFuture<Void> u : unlocks) {
            try {
                u.join();
            } catch (Throwable e) {
                // Expired meanwhile: nothing to release.
            }
        }
        released += WAITED_LOCKS.size();
        WAITED_LOCKS.clear();
        WAITED_IDS.clear();
        return String.format(Locale.ROOT, "released=%d at=%d end=%d ms=%.1f", released, at,
                System.currentTimeMillis(), (System.nanoTime() - started) / 1e6);
    }

    static String scaleWait(String[] w) throws Exception {
        int count = intArg(required(w, 2, "count"));
        if (w.length < 4) {
            throw invalid("missing prefix");
        }
        String prefix = w[3];
        long waitMs = required(w, 4, "waitMs");
        for (int i = 0; i < count; i++) {
            RLock lock = client.getLock(prefix + i);
            long id = NEXT_ID.getAndIncrement();
            CompletableFuture<Boolean> f = lock.tryLockAsync(waitMs, -1, MS, id).toCompletableFuture();
            WAITERS.add(f.whenComplete((ok, e) -> {
                if (Boolean.TRUE.equals(ok)) {
                    long now = System.currentTimeMillis();
                    FIRST_AT.accumulateAndGet(now, Math::min);
                    LAST_AT.accumulateAndGet(now, Math::max);
                    synchronized (WAITED_LOCKS) {
                        WAITED_LOCKS.add(lock);
                        WAITED_IDS.add(id);
                    }
                }
            }));
        }
        return "waiting=" + WAITERS.size();
    }

    static String scaleWaited() {
        int acquired = 0;
        int timedOut = 0;
        int errors = 0;
        List<String> kinds = new ArrayList<>();
        for (CompletableFuture<Boolean> f : WAITERS) {
            try {
                if (f.join()) {
                    acquired++;
                } else {
                    timedOut++;
                }
            } catch (Throwable e) {
                errors++;
                String kind = classify(e).kind;
                if (!kinds.contains(kind)) {
                    kinds.add(kind);
                }
            }
        }
        WAITERS.clear();
        String line = "acquired=" + acquired + " timed_out=" + timedOut + " errors=" + errors;
        if (acquired > 0) {
            line += " first_at=" + FIRST_AT.get() + " last_at=" + LAST_AT.get();
        }
        if (!kinds.isEmpty()) {
            line += " error_kinds=" + String.join(",", kinds);
        }
        FIRST_AT.set(Long.MAX_VALUE);
        LAST_AT.set(0);
        return line;
    }

    static String scaleChurn(String[] w) throws Exception {
        int count = intArg(required(w, 2, "count"));
        if (w.length < 4) {
            throw invalid("missing prefix");
        }
        String prefix = w[3];
        Long t = number(w, 4);
        int tasks = Math.max(1, t == null ? 32 : intArg(t));
        long started = System.nanoTime();
        Throwable[] failure = new Throwable[1];
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < tasks; i++) {
            int first = i;
            Thread th = new Thread(() -> {
                try {
                    for (int n = first; n < count; n += tasks) {
                        RLock lock = client.getLock(prefix + n);
                        lock.lock();
                        lock.unlock();
                    }
                } catch (Throwable e) {
                    synchronized (failure) {
                        failure[0] = e;
                    }
                }
            }, "scale-churn-" + i);
            threads.add(th);
            th.start();
        }
        for (Thread th : threads) {
            th.join();
        }
        if (failure[0] != null) {
            throw failure[0] instanceof Exception ? (Exception) failure[0] : new RuntimeException(failure[0]);
        }
        double took = (System.nanoTime() - started) / 1e9;
        return String.format(Locale.ROOT, "ops=%d ms=%.0f per_s=%.0f", count, took * 1000, count / Math.max(took, 1e-9));
    }

    // ---------------------------------------------------------------------------------------
    // Bench: the crate's `bench` loop, with Java threads (compat-tests/src/bench.rs).

    static String bench(String[] w) {
        String mode = w.length > 1 ? w[1] : "";
        int owners;
        long millis;
        int locks;
        try {
            owners = Integer.parseInt(w[2]);
            millis = Long.parseLong(w[3]);
            locks = w.length > 4 ? Integer.parseInt(w[4]) : 1;
        } catch (RuntimeException e) {
            mode = "";
            owners = 0;
            millis = 0;
            locks = 0;
        }
        if (!(mode.equals("uncontended") || mode.equals("contended") || mode.equals("leased")) || owners < 1) {
            return "- bench ERR INVALID: bench <uncontended|contended|leased> <threads> <millis> [locks]";
        }
        String run = Long.toHexString(System.nanoTime());
        long started = System.nanoTime();
        long deadline = started + millis * 1_000_000L;
        List<long[]> results = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        Throwable[] failure = new Throwable[1];
        for (int i = 0; i < owners; i++) {
            String name = mode.equals("contended") ? "bench:contended:c" + (i % Math.max(1, locks)) : "bench:" + run + ":u" + i;
            boolean leased = mode.equals("leased");
            long[][] mine = new long[1][];
            results.add(null);
            int slot = i;
            Thread t = new Thread(() -> {
                RLock lock = client.getLock(name);
                long[] samples = new long[4096];
                int n = 0;
                try {
                    while (System.nanoTime() < deadline) {
                        long t0 = System.nanoTime();
                        if (leased) {
                            lock.lock(30_000, MS);
                        } else {
                            lock.lock();
                        }
                        lock.unlock();
                        if (n == samples.length) {
                            samples = Arrays.copyOf(samples, n * 2);
                        }
                        samples[n++] = (System.nanoTime() - t0) / 1000;
                    }
                } catch (Throwable e) {
                    synchronized (failure) {
                        failure[0] = e;
                    }
                }
                mine[0] = Arrays.copyOf(samples, n);
                synchronized (results) {
                    results.set(slot, mine[0]);
                }
            }, "bench-" + i);
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) {
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (failure[0] != null) {
            Fail f = classify(failure[0]);
            return "- bench ERR " + f.kind + ": " + oneLine(f.getMessage());
        }
        double elapsed = (System.nanoTime() - started) / 1e9;
        int total = 0;
        for (long[] r : results) {
            total += r.length;
        }
        long[] all = new long[total];
        int at = 0;
        for (long[] r : results) {
            System.arraycopy(r, 0, all, at, r.length);
            at += r.length;
        }
        Arrays.sort(all);
        return String.format(Locale.ROOT, "- bench OK ops=%d ops_per_s=%.1f p50_us=%d p99_us=%d max_us=%d",
                all.length, all.length / Math.max(elapsed, 1e-9), pick(all, 0.50), pick(all, 0.99),
                all.length == 0 ? 0 : all[all.length - 1]);
    }

    static long pick(long[] sorted, double q) {
        return sorted.length == 0 ? 0 : sorted[(int) Math.round((sorted.length - 1) * q)];
    }

    // ---------------------------------------------------------------------------------------
    // Start

    static String version() {
        String v = Redisson.class.getPackage().getImplementationVersion();
        return v == null ? "unknown" : v;
    }

    public static void main(String[] args) throws Exception {
        // Redisson logs through SLF4J (slf4j-simple on standard error): warnings only, unless set.
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        // A notice about the Debian netty's version on every start, not about this run.
        System.setProperty("org.slf4j.simpleLogger.log.org.redisson.connection.SequentialDnsAddressResolverFactory", "error");
        long watchdogMs = 30_000;
        long fairWaitMs = 300_000;
        int batch = 100;
        int timeoutMs = 3_000;
        boolean cluster = false;
        String sharded = "auto";
        String sentinel = null;
        Long replicaSyncMs = null;
        String url = null;
        try {
            for (int i = 0; i < args.length; i++) {
                String a = args[i];
                switch (a) {
                    case "--watchdog-ms":
                        watchdogMs = Long.parseLong(args[++i]);
                        break;
                    case "--fair-wait-ms":
                        fairWaitMs = Long.parseLong(args[++i]);
                        break;
                    case "--watchdog-batch":
                        batch = Integer.parseInt(args[++i]);
                        break;
                    case "--timeout-ms":
                        timeoutMs = Integer.parseInt(args[++i]);
                        break;
                    case "--cluster":
                        cluster = true;
                        break;
                    case "--sharded-pubsub":
                        sharded = args[++i];
                        if (!Arrays.asList("auto", "on", "off").contains(sharded)) {
                            emit("- ready ERR " + (sharded.equals("both") ? "UNSUPPORTED: Redisson has no 'both' mode"
                                    : "INVALID: --sharded-pubsub takes auto, on or off"));
                            System.exit(2);
                        }
                        break;
                    case "--sentinel":
                        sentinel = args[++i];
                        break;
                    case "--replica-sync-ms":
                        replicaSyncMs = Long.parseLong(args[++i]);
                        break;
                    case "--tls-ca":
                        emit("- ready ERR UNSUPPORTED: this driver has no --tls-ca");
                        System.exit(2);
                        break;
                    default:
                        if (a.startsWith("--")) {
                            emit("- ready ERR INVALID: unknown option " + a);
                            System.exit(2);
                        }
                        url = a;
                }
            }
        } catch (RuntimeException e) {
            emit("- ready ERR INVALID: " + oneLine(e.toString()));
            System.exit(2);
        }
        if (url == null) {
            emit("- ready ERR INVALID: usage: LockPeer [options] redis://127.0.0.1:PORT");
            System.exit(2);
        }
        Config config = new Config();
        // The group lock hashes its values with the client's codec: strings as UTF-8, as the crate.
        config.setCodec(StringCodec.INSTANCE);
        config.setLockWatchdogTimeout(watchdogMs);
        config.setFairLockWaitTimeout(fairWaitMs);
        config.setLockWatchdogBatchSize(batch);
        if (replicaSyncMs != null) {
            config.setCheckLockSyncedSlaves(replicaSyncMs > 0);
            if (replicaSyncMs > 0) {
                config.setSlavesSyncTimeout(replicaSyncMs);
            }
        }
        String[] urls = url.split(",");
        if (sentinel != null) {
            SentinelServersConfig s = config.useSentinelServers().setMasterName(sentinel).addSentinelAddress(urls);
            s.setCheckSentinelsList(false);
            s.setTimeout(timeoutMs);
        } else if (cluster) {
            ClusterServersConfig c = config.useClusterServers().addNodeAddress(urls);
            c.setShardedSubscriptionMode(ShardedSubscriptionMode.valueOf(sharded.toUpperCase(Locale.ROOT)));
            c.setTimeout(timeoutMs);
        } else {
            config.useSingleServer().setAddress(url).setTimeout(timeoutMs);
        }
        try {
            client = Redisson.create(config);
        } catch (Throwable e) {
            Fail f = classify(e);
            String kind = f.kind.equals("JAVA") || f.kind.equals("REDIS") ? "CONNECTION" : f.kind;
            emit("- ready ERR " + kind + ": " + oneLine(f.getMessage()));
            System.exit(1);
        }
        emit("- ready OK id=" + client.getId() + " version=" + version() + " watchdog_ms=" + watchdogMs
                + " fair_wait_ms=" + fairWaitMs + " watchdog_batch=" + batch + " timeout_ms=" + timeoutMs
                + " client=redisson-java");

        Map<String, Worker> threads = new HashMap<>();
        InputStream in = System.in;
        ByteArrayOutputStream raw = new ByteArrayOutputStream();
        while (true) {
            raw.reset();
            int b;
            boolean eof = false;
            while ((b = in.read()) != '\n') {
                if (b < 0) {
                    eof = true;
                    break;
                }
                raw.write(b);
            }
            if (eof && raw.size() == 0) {
                break;
            }
            byte[] bytes = raw.toByteArray();
            int len = bytes.length;
            if (len > 0 && bytes[len - 1] == '\r') {
                len--;
            }
            String line;
            try {
                line = StandardCharsets.UTF_8.newDecoder()
                        .onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT)
                        .decode(ByteBuffer.wrap(bytes, 0, len)).toString().trim();
            } catch (CharacterCodingException e) {
                rejectInvalid(Arrays.copyOf(bytes, len), threads);
                if (eof) {
                    break;
                }
                continue;
            }
            if (!line.isEmpty() && !line.startsWith("#")) {
                if (!global(line.split("\\s+"), threads)) {
                    break;
                }
            }
            if (eof) {
                break;
            }
        }
        quit();
    }

    /** Runs a global command or hands a thread command to its thread; false on `quit`. */
    static boolean global(String[] words, Map<String, Worker> threads) throws InterruptedException {
        switch (words[0]) {
            case "id":
                emit("- id OK " + client.getId());
                return true;
            case "sleep": {
                long ms = 0;
                try {
                    ms = words.length > 1 ? Long.parseLong(words[1]) : 0;
                } catch (NumberFormatException e) {
                    ms = 0;
                }
                Thread.sleep(Math.max(0, ms));
                emit("- sleep OK");
                return true;
            }
            case "await": {
                if (words.length < 2) {
                    emit("- await ERR INVALID: await needs a thread");
                    return true;
                }
                Worker t = threads.get(words[1]);
                if (t != null) {
                    CountDownLatch done = new CountDownLatch(1);
                    t.submit(done);
                    done.await();
                }
                emit("- await OK " + words[1]);
                return true;
            }
            case "bench":
                emit(bench(words));
                return true;
            case "scale":
                emit(scale(words));
                return true;
            case "quit":
                return false;
            case "halt":
                // As a crash would: no unlock, no clean-up.
                Runtime.getRuntime().halt(137);
                return false;
            default:
                if (words.length < 2) {
                    // A thread word alone: nothing to run.
                    return true;
                }
                worker(threads, words[0]).submit(Arrays.copyOfRange(words, 1, words.length));
                return true;
        }
    }

    static Worker worker(Map<String, Worker> threads, String name) {
        return threads.computeIfAbsent(name, n -> {
            Worker w = new Worker(n);
            w.start();
            return w;
        });
    }

    /** A line that is not valid UTF-8: `ERR INVALID`, on its thread's line where it names one. */
    static void rejectInvalid(byte[] bytes, Map<String, Worker> threads) {
        List<String> words = new ArrayList<>();
        int i = 0;
        while (i < bytes.length && words.size() < 2) {
            while (i < bytes.length && isSpace(bytes[i])) {
                i++;
            }
            int start = i;
            while (i < bytes.length && !isSpace(bytes[i])) {
                i++;
            }
            if (i > start) {
                try {
                    words.add(StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                            .decode(ByteBuffer.wrap(bytes, start, i - start)).toString());
                } catch (CharacterCodingException e) {
                    words.add(null);
                }
            }
        }
        String first = words.size() > 0 ? words.get(0) : null;
        String second = words.size() > 1 ? words.get(1) : null;
        if (first != null && second != null && !GLOBAL.contains(first)) {
            worker(threads, first).submit(new Fail("INVALID", second));
        } else if (first != null) {
            emit("- " + first + " ERR INVALID: input line is not valid UTF-8");
        } else {
            emit("- ? ERR INVALID: input line is not valid UTF-8");
        }
    }

    static boolean isSpace(byte b) {
        return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == 0x0b || b == 0x0c;
    }

    /** Releases nothing on purpose, stops the watchdog, shuts down cleanly. */
    static void quit() {
        try {
            client.shutdown(0, 2, TimeUnit.SECONDS);
        } catch (Throwable e) {
            // Shutting down anyway.
        }
        emit("- quit OK");
        OUT.flush();
        Runtime.getRuntime().halt(0);
    }
}
