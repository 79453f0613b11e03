// CuratorSemaphore: one Apache Curator 5.4 InterProcessSemaphoreV2, driven
// line by line, for the interop tests of package interop. A single-file
// program, run with Java's source launcher (no javac needed):
//
//   java -cp <Debian's Curator and ZooKeeper jars> CuratorSemaphore.java CONNECT PATH MAXLEASES
//
// It prints "CONNECTED <session id in hex>" once connected, then reads one
// command a line from stdin and answers each with one line on stdout:
//
//   acquire <ms>   -> ACQUIRED <lease node name> | TIMEOUT
//   release        -> RELEASED <lease node name>  (the oldest lease it holds)
//   quit           -> BYE (and exits; so does EOF)
//
// A command that throws prints "ERROR <exception>".

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryOneTime;

public final class CuratorSemaphore {
    static void say(String line) {
        System.out.println(line);
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length != 3) {
            System.err.println("usage: CuratorSemaphore CONNECT PATH MAXLEASES");
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
        InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(client, argv[1], Integer.parseInt(argv[2]));
        ArrayDeque<Lease> held = new ArrayDeque<>();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] cmd = line.trim().split("\\s+");
            if (cmd[0].equals("quit")) break;
            try {
                switch (cmd[0]) {
                    case "acquire":
                        Lease l = sem.acquire(Long.parseLong(cmd[1]), TimeUnit.MILLISECONDS);
                        if (l == null) {
                            say("TIMEOUT");
                        } else {
                            held.add(l);
                            say("ACQUIRED " + l.getNodeName());
                        }
                        break;
                    case "release":
                        Lease r = held.remove();
                        String name = r.getNodeName();
                        r.close();
                        say("RELEASED " + name);
                        break;
                    default:
                        say("ERROR unknown command " + line);
                }
            } catch (Exception e) {
                say("ERROR " + e);
            }
        }
        for (Lease l : held) l.close();
        client.close();
        say("BYE");
    }
}
