// CuratorDiscovery: one Apache Curator 5.4 ServiceDiscovery (curator-x-discovery,
// its default JsonInstanceSerializer, payload class Object) and a ServiceCache of
// one service, driven line by line, for the discovery interop test of package
// interop. A single-file program, run with Java's source launcher:
//
//   java -cp <Curator, ZooKeeper, curator-x-discovery and Jackson jars> CuratorDiscovery.java CONNECT BASE NAME
//
// It prints "CONNECTED <session id in hex>" once connected, then reads one
// command a line from stdin and answers each with one line on stdout:
//
//   register ID ADDRESS PORT PAYLOAD -> REGISTERED <the node's data>  (registerService, DYNAMIC;
//                                       PAYLOAD is JSON, read as a Map)
//   update ADDRESS PORT              -> UPDATED <the node's data>     (updateService of that instance)
//   unregister                       -> UNREGISTERED                  (unregisterService)
//   await SPEC MS                    -> MATCH | TIMEOUT <instances>: until the ServiceCache's
//                                       instances, as "id@address:port<payload JSON>" sorted by id
//                                       and joined by ";", are SPEC ("-" for none)
//   instances                        -> INSTANCES <JSON array of the cache's instances, sorted by id>
//   names BASE                       -> NAMES <queryForNames of a ServiceDiscovery on BASE, joined
//                                       by ","> | NONODE (it threw NoNodeException)
//   quit                             -> BYE (and exits; so does EOF)
//
// A command that throws prints "ERROR <exception>".

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryOneTime;
import org.apache.curator.x.discovery.ServiceCache;
import org.apache.curator.x.discovery.ServiceDiscovery;
import org.apache.curator.x.discovery.ServiceDiscoveryBuilder;
import org.apache.curator.x.discovery.ServiceInstance;
import org.apache.curator.x.discovery.ServiceType;
import org.apache.zookeeper.KeeperException;

public final class CuratorDiscovery {
    static final ObjectMapper JSON = new ObjectMapper();

    static void say(String line) {
        System.out.println(line);
    }

    static List<ServiceInstance<Object>> sorted(ServiceCache<Object> cache) {
        List<ServiceInstance<Object>> l = new ArrayList<>(cache.getInstances());
        l.sort(Comparator.comparing(ServiceInstance::getId));
        return l;
    }

    static String spec(ServiceCache<Object> cache) throws Exception {
        StringBuilder b = new StringBuilder();
        for (ServiceInstance<Object> i : sorted(cache)) {
            if (b.length() > 0) b.append(';');
            b.append(i.getId()).append('@').append(i.getAddress()).append(':').append(i.getPort())
                    .append(JSON.writeValueAsString(i.getPayload()));
        }
        return b.length() == 0 ? "-" : b.toString();
    }

    static String instances(ServiceCache<Object> cache) throws Exception {
        List<Object> out = new ArrayList<>();
        for (ServiceInstance<Object> i : sorted(cache)) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("name", i.getName());
            m.put("id", i.getId());
            m.put("address", i.getAddress());
            m.put("port", i.getPort());
            m.put("sslPort", i.getSslPort());
            m.put("payload", i.getPayload());
            m.put("registrationTimeUTC", i.getRegistrationTimeUTC());
            m.put("serviceType", i.getServiceType() == null ? null : i.getServiceType().name());
            out.add(m);
        }
        return JSON.writeValueAsString(out);
    }

    static ServiceInstance<Object> instance(String name, String id, String address, int port, Object payload) throws Exception {
        return ServiceInstance.<Object>builder().name(name).id(id).address(address).port(port).payload(payload)
                .serviceType(ServiceType.DYNAMIC).build();
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length != 3) {
            System.err.println("usage: CuratorDiscovery CONNECT BASE NAME");
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
        String base = argv[1], name = argv[2];
        ServiceDiscovery<Object> sd = ServiceDiscoveryBuilder.builder(Object.class).client(client).basePath(base).build();
        sd.start();
        ServiceCache<Object> cache = sd.serviceCacheBuilder().name(name).build();
        cache.start();
        say("CONNECTED " + Long.toHexString(client.getZookeeperClient().getZooKeeper().getSessionId()));
        ServiceInstance<Object> mine = null;

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] cmd = line.trim().split("\\s+");
            if (cmd[0].equals("quit")) break;
            try {
                switch (cmd[0]) {
                    case "register":
                        mine = instance(name, cmd[1], cmd[2], Integer.parseInt(cmd[3]), JSON.readValue(cmd[4], Object.class));
                        sd.registerService(mine);
                        say("REGISTERED " + new String(client.getData().forPath(base + "/" + name + "/" + mine.getId()), StandardCharsets.UTF_8));
                        break;
                    case "update":
                        mine = instance(name, mine.getId(), cmd[1], Integer.parseInt(cmd[2]), mine.getPayload());
                        sd.updateService(mine);
                        say("UPDATED " + new String(client.getData().forPath(base + "/" + name + "/" + mine.getId()), StandardCharsets.UTF_8));
                        break;
                    case "unregister":
                        sd.unregisterService(mine);
                        say("UNREGISTERED");
                        break;
                    case "await": {
                        long deadline = System.currentTimeMillis() + Long.parseLong(cmd[2]);
                        String got = spec(cache);
                        while (!got.equals(cmd[1]) && System.currentTimeMillis() < deadline) {
                            Thread.sleep(10);
                            got = spec(cache);
                        }
                        say(got.equals(cmd[1]) ? "MATCH" : "TIMEOUT " + got);
                        break;
                    }
                    case "instances":
                        say("INSTANCES " + instances(cache));
                        break;
                    case "names": {
                        ServiceDiscovery<Object> other = ServiceDiscoveryBuilder.builder(Object.class).client(client).basePath(cmd[1]).build();
                        other.start();
                        try {
                            say("NAMES " + String.join(",", new TreeSet<>(other.queryForNames())));
                        } catch (KeeperException.NoNodeException e) {
                            say("NONODE");
                        } finally {
                            other.close();
                        }
                        break;
                    }
                    default:
                        say("ERROR unknown command " + line);
                }
            } catch (Exception e) {
                say("ERROR " + e);
            }
        }
        say("BYE");
        cache.close();
        sd.close();
        client.close();
    }
}
