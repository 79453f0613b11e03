// CuratorBarrier: one Apache Curator 5.4 DistributedDoubleBarrier member,
// driven line by line, for the interop tests of package interop. A
// single-file program, run with Java's source launcher (no javac needed):
//
//   java -cp <Debian's Curator and ZooKeeper jars> CuratorBarrier.java CONNECT PATH MEMBERS
//
// It prints "CONNECTED <session id in hex>" once connected, then reads one
// command a line from stdin and answers each with one line on stdout:
//
//   enter <ms>  -> ENTERED | TIMEOUT   (a new DistributedDoubleBarrier each round)
//   leave <ms>  -> LEFT | TIMEOUT
//   quit        -> BYE (and exits; so does EOF)
//
// A command that throws prints "ERROR <exception>".

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.retry.RetryOneTime;

public final class CuratorBarrier {
    static void say(String line) {
        System.out.println(line);
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length != 3) {
            System.err.println("usage: CuratorBarrier CONNECT PATH MEMBERS");
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
        say("CONNECTED " + Long.toHexString(client.getZookeeperClient().getZooKeeper().getSessionId()));
        int members = Integer.parseInt(argv[2]);
        DistributedDoubleBarrier barrier = null;

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] cmd = line.trim().split("\\s+");
            if (cmd[0].equals("quit")) break;
            try {
                switch (cmd[0]) {
                    case "enter":
                        barrier = new DistributedDoubleBarrier(client, argv[1], members);
                        say(barrier.enter(Long.parseLong(cmd[1]), TimeUnit.MILLISECONDS) ? "ENTERED" : "TIMEOUT");
                        break;
                    case "leave":
                        say(barrier.leave(Long.parseLong(cmd[1]), TimeUnit.MILLISECONDS) ? "LEFT" : "TIMEOUT");
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
