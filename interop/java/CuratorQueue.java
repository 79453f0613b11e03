// CuratorQueue: one Apache Curator 5.4 SimpleDistributedQueue, driven line
// by line, for the interop tests of package interop. A single-file program,
// run with Java's source launcher (no javac needed):
//
//   java -cp <Debian's Curator and ZooKeeper jars> CuratorQueue.java CONNECT PATH
//
// It prints "CONNECTED <session id in hex>" once connected, then reads one
// command a line from stdin and answers each with one line on stdout:
//
//   offer <n> <prefix>  -> OFFERED <n>   (items <prefix>0 .. <prefix>n-1, in order)
//   drain <n> <ms>      -> TOOK <item>,<item>,...  (up to n items, each
//                          waited for at most ms; fewer when one does not come)
//   quit                -> BYE (and exits; so does EOF)
//
// A command that throws prints "ERROR <exception>".

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.queue.SimpleDistributedQueue;
import org.apache.curator.retry.RetryOneTime;

public final class CuratorQueue {
    static void say(String line) {
        System.out.println(line);
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length != 2) {
            System.err.println("usage: CuratorQueue CONNECT PATH");
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
        SimpleDistributedQueue queue = new SimpleDistributedQueue(client, argv[1]);

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] cmd = line.trim().split("\\s+");
            if (cmd[0].equals("quit")) break;
            try {
                switch (cmd[0]) {
                    case "offer":
                        int n = Integer.parseInt(cmd[1]);
                        for (int i = 0; i < n; i++) {
                            queue.offer((cmd[2] + i).getBytes(StandardCharsets.UTF_8));
                        }
                        say("OFFERED " + n);
                        break;
                    case "drain":
                        int want = Integer.parseInt(cmd[1]);
                        long ms = Long.parseLong(cmd[2]);
                        List<String> took = new ArrayList<>();
                        while (took.size() < want) {
                            byte[] item = queue.poll(ms, TimeUnit.MILLISECONDS);
                            if (item == null) break;
                            took.add(new String(item, StandardCharsets.UTF_8));
                        }
                        say("TOOK " + String.join(",", took));
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
