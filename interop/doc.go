// Package interop checks, on a real ZooKeeper, that zkrecipes and Apache
// Curator 5.4 share their recipes: a Curator InterProcessMutex and a
// machines/lock Lock exclude each other on one path, and a Curator
// LeaderLatch or LeaderSelector and a machines/election Election elect
// exactly one leader together, each reading the other's participant id.
// On a secured server a Curator client with our digest identity and a
// namespace equal to our chroot shares our lock's line, and another
// identity can read that line but delete nobody's node.
//
// It has tests only. They run java/CuratorPeer.java with Java's
// single-file source launcher against Debian's Curator jars
// (libcurator-recipes-java, libcurator-framework-java,
// libcurator-client-java) and drive it one command at a time over its
// stdin, waiting on the lines it prints. Without java or those jars the
// tests skip, or fail when the environment sets ZK_REQUIRED=1.
package interop
