// CuratorGroup: one Apache Curator 5.4 GroupMember, driven line by line,
// for the group interop tests of package interop. A single-file program,
// run with Java's source launcher (no javac needed):
//
//   java -cp <Debian's Curator and ZooKeeper jars> CuratorGroup.java CONNECT PATH ID
//
// It prints "CONNECTED <session id in hex>" once connected, then reads one
// command a line from stdin and answers each with one line on stdout:
//
//   join <payload> <ms>  -> JOINED | TIMEOUT  (a GroupMember; JOINED once
//                           PATH/ID exists with this session as its owner)
//   set <payload>        -> SET               (setThisData)
//   await <spec> <ms>    -> MATCH | TIMEOUT <members>: until
//                           getCurrentMembers, as "id=payload" sorted and
//                           joined by ",", is spec ("-" for none)
//   leave                -> LEFT              (close)
//   quit                 -> BYE (and exits; so does EOF)
//
// A command that throws prints "ERROR <exception>".

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.nodes.GroupMember;
import org.apache.curator.retry.RetryOneTime;
import org.apache.zookeeper.data.Stat;

public final class CuratorGroup {
    static void say(String line) {
        System.out.println(line);
    }

    static String members(GroupMember m) {
        TreeMap<String, String> sorted = new TreeMap<>();
        for (Map.Entry<String, byte[]> e : m.getCurrentMembers().entrySet()) {
            sorted.put(e.getKey(), new String(e.getValue(), StandardCharsets.UTF_8));
        }
        StringBuilder b = new StringBuilder();
        for (Map.Entry<String, String> e : sorted.entrySet()) {
            if (b.length() > 0) b.append(',');
            b.append(e.getKey()).append('=').append(e.getValue());
        }
        return b.length() == 0 ? "-" : b.toString();
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length != 3) {
            System.err.println("usage: CuratorGroup CONNECT PATH ID");
            System.exit(2);
        }
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(argv[0])
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(10000)
                .retryPolicy(new RetryOneTime(100))
                .build();
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            System.err.println("could not connect to " + argv[0]);
            System.exit(1);
        }
        long session = client.getZookeeperClient().getZooKeeper().getSessionId();
        say("CONNECTED " + Long.toHexString(session));
        String path = argv[1], id = argv[2], node = path + "/" + id;
        GroupMember member = null;

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] cmd = line.trim().split("\\s+");
            if (cmd[0].equals("quit")) break;
            try {
                switch (cmd[0]) {
                    case "join": {
                        member = new GroupMember(client, path, id, cmd[1].getBytes(StandardCharsets.UTF_8));
                        member.start();
                        long deadline = System.currentTimeMillis() + Long.parseLong(cmd[2]);
                        String answer = "TIMEOUT";
                        while (System.currentTimeMillis() < deadline) {
                            Stat st = client.checkExists().forPath(node);
                            if (st != null && st.getEphemeralOwner() == session) {
                                answer = "JOINED";
                                break;
                            }
                            Thread.sleep(10);
                        }
                        say(answer);
                        break;
                    }
                    case "set":
                        member.setThisData(cmd[1].getBytes(StandardCharsets.UTF_8));
                        say("SET");
                        break;
                    case "await": {
                        long deadline = System.currentTimeMillis() + Long.parseLong(cmd[2]);
                        String got = members(member);
                        while (!got.equals(cmd[1]) && System.currentTimeMillis() < deadline) {
                            Thread.sleep(10);
                            got = members(member);
                        }
                        say(got.equals(cmd[1]) ? "MATCH" : "TIMEOUT " + got);
                        break;
                    }
                    case "leave":
                        member.close();
                        say("LEFT");
                        break;
                    default:
                        say("ERROR unknown command " + line);
                }
            } catch (Exception e) {
                say("ERROR " + e);
            }
        }
        say("BYE");
        client.close();
    }
}
