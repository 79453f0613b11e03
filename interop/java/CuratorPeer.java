// CuratorPeer: one Apache Curator 5.4 recipe, driven line by line, for the
// interop tests of package interop. It is a single-file program, run with
// Java's source launcher (no javac needed):
//
//   java -cp <Debian's Curator and ZooKeeper jars> CuratorPeer.java CONNECT ROLE PATH ID
//
// ROLE is mutex (InterProcessMutex), read or write (the read or the write
// lock of an InterProcessReadWriteLock), latch (LeaderLatch) or selector
// (LeaderSelector); ID is the participant id of a latch or selector. It
// prints "CONNECTED <session id in hex>" once connected, then reads one
// command a line from stdin and answers each with one line on stdout:
//
//   any role   quit                -> BYE (and exits; so does EOF)
//   mutex      acquire <ms>        -> ACQUIRED <node> | TIMEOUT
//              release             -> RELEASED
//              revocable           -> REVOCABLE; from then on (makeRevocable) the
//                                     revocation listener prints REVOKE_REQUESTED
//                                     (and the holder keeps the lock)
//              revoke <node>       -> REVOKE_SENT (Revoker.attemptRevoke on node)
//   read/write acquire, release    as mutex; ACQUIRED names the first node of
//                                     the lock's queue, not necessarily ours
//   latch      start               -> STARTED; a new LeaderLatch joins, and its listener
//                                     prints LEADER and NOTLEADER
//   selector   start               -> STARTED; the leadership function prints LEADING,
//                                     waits for yield, prints YIELDED and returns
//              yield               -> (YIELDED comes from the leadership function)
//              requeue             -> REQUEUED <true|false>
//   both       leader              -> LEADERID <id of the leader, as Curator reads it>
//              participants        -> PARTICIPANTS <id>,<id>,... in queue order
//              status              -> STATUS <hasLeadership>
//              close               -> CLOSED
//
// With CURATOR_AUTH=scheme:credential in the environment the client
// authenticates so and creates its nodes with the creator's identities
// holding every permission and anyone reading (zkrecipes' default on an
// authenticated connection); with CURATOR_NAMESPACE=ns it works under /ns
// (a chroot).
//
// A command that throws prints "ERROR <exception>". Lines are written whole
// (println on one PrintStream), so listener lines never split an answer.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.api.ACLProvider;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.RetryOneTime;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.data.ACL;

public final class CuratorPeer {
    static void say(String line) {
        System.out.println(line);
    }

    static final LeaderLatchListener LATCH_LISTENER = new LeaderLatchListener() {
        @Override
        public void isLeader() {
            say("LEADER");
        }

        @Override
        public void notLeader() {
            say("NOTLEADER");
        }
    };

    // The ACL zkrecipes gives a node on an authenticated connection by
    // default: everything to the creator's identities, reading to anyone.
    static final ACLProvider CREATOR_ALL_WORLD_READ = new ACLProvider() {
        final List<ACL> acl = new ArrayList<>(ZooDefs.Ids.CREATOR_ALL_ACL);
        {
            acl.addAll(ZooDefs.Ids.READ_ACL_UNSAFE);
        }

        @Override
        public List<ACL> getDefaultAcl() {
            return acl;
        }

        @Override
        public List<ACL> getAclForPath(String path) {
            return acl;
        }
    };

    static String ids(Collection<Participant> ps) {
        List<String> out = new ArrayList<>();
        for (Participant p : ps) out.add(p.getId());
        return String.join(",", out);
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length != 4) {
            System.err.println("usage: CuratorPeer CONNECT mutex|read|write|latch|selector PATH ID");
            System.exit(2);
        }
        String connect = argv[0], role = argv[1], path = argv[2], id = argv[3];
        CuratorFrameworkFactory.Builder builder = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(10000)
                .retryPolicy(new RetryOneTime(100));
        String auth = System.getenv("CURATOR_AUTH"), namespace = System.getenv("CURATOR_NAMESPACE");
        if (auth != null && !auth.isEmpty()) {
            int colon = auth.indexOf(':');
            builder.authorization(auth.substring(0, colon), auth.substring(colon + 1).getBytes(StandardCharsets.UTF_8))
                    .aclProvider(CREATOR_ALL_WORLD_READ);
        }
        if (namespace != null && !namespace.isEmpty()) {
            builder.namespace(namespace);
        }
        CuratorFramework client = builder.build();
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            System.err.println("could not connect to " + connect);
            System.exit(1);
        }
        say("CONNECTED " + Long.toHexString(client.getZookeeperClient().getZooKeeper().getSessionId()));

        InterProcessMutex mutex = null;
        LeaderLatch latch = null;
        LeaderSelector selector = null;
        Semaphore handBack = new Semaphore(0); // released by yield
        switch (role) {
            case "mutex":
                mutex = new InterProcessMutex(client, path);
                break;
            case "read":
                mutex = new InterProcessReadWriteLock(client, path).readLock();
                break;
            case "write":
                mutex = new InterProcessReadWriteLock(client, path).writeLock();
                break;
            case "latch":
                break; // each start makes a new LeaderLatch: a closed one cannot start again
            case "selector":
                selector = new LeaderSelector(client, path, new LeaderSelectorListenerAdapter() {
                    @Override
                    public void takeLeadership(CuratorFramework c) throws Exception {
                        say("LEADING");
                        handBack.acquire();
                        say("YIELDED");
                    }
                });
                selector.setId(id);
                break;
            default:
                System.err.println("unknown role " + role);
                System.exit(2);
        }

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] cmd = line.trim().split("\\s+");
            if (cmd[0].equals("quit")) break;
            try {
                switch (cmd[0]) {
                    case "acquire":
                        // Curator's mutex belongs to the thread that took it: this one.
                        if (mutex.acquire(Long.parseLong(cmd[1]), TimeUnit.MILLISECONDS)) {
                            // The holder's node is the first in queue order.
                            say("ACQUIRED " + mutex.getParticipantNodes().iterator().next());
                        } else {
                            say("TIMEOUT");
                        }
                        break;
                    case "release":
                        mutex.release();
                        say("RELEASED");
                        break;
                    case "revocable":
                        mutex.makeRevocable(forLock -> say("REVOKE_REQUESTED"));
                        say("REVOCABLE");
                        break;
                    case "revoke":
                        Revoker.attemptRevoke(client, cmd[1]);
                        say("REVOKE_SENT");
                        break;
                    case "start":
                        if (role.equals("selector")) {
                            selector.start();
                        } else if (role.equals("latch")) {
                            latch = new LeaderLatch(client, path, id);
                            latch.addListener(LATCH_LISTENER);
                            latch.start();
                        } else {
                            throw new IllegalStateException("start is for latch and selector");
                        }
                        say("STARTED");
                        break;
                    case "yield":
                        handBack.release();
                        break;
                    case "requeue":
                        say("REQUEUED " + selector.requeue());
                        break;
                    case "leader":
                        say("LEADERID " + (latch != null ? latch.getLeader() : selector.getLeader()).getId());
                        break;
                    case "participants":
                        say("PARTICIPANTS " + ids(latch != null ? latch.getParticipants() : selector.getParticipants()));
                        break;
                    case "status":
                        say("STATUS " + (latch != null ? latch.hasLeadership() : selector.hasLeadership()));
                        break;
                    case "close":
                        if (latch != null) latch.close(LeaderLatch.CloseMode.NOTIFY_LEADER);
                        else selector.close();
                        say("CLOSED");
                        break;
                    default:
                        say("ERROR unknown command " + line);
                }
            } catch (Exception e) {
                say("ERROR " + e);
            }
        }
        client.close();
        say("BYE");
    }
}
