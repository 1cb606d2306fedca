package dev.kb.opensearchlocal;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.opensearch.action.admin.cluster.health.ClusterHealthResponse;
import org.opensearch.cluster.health.ClusterHealthStatus;
import org.opensearch.common.settings.Settings;
import org.opensearch.common.unit.TimeValue;
import org.opensearch.core.common.transport.TransportAddress;
import org.opensearch.env.Environment;
import org.opensearch.http.HttpServerTransport;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.plugins.Plugin;

/**
 * A real single-node OpenSearch 2.19 started in-process, with the classpath
 * plugins Netty4 (HTTP/transport), Painless, analysis-common, reindex
 * (_delete_by_query) and k-NN (lucene engine only: the Maven zip ships no native libraries).
 *
 * <p>Usage: {@code java [jvm opts] -cp 'target/classes:target/lib/*'
 * dev.kb.opensearchlocal.LocalOpenSearch [--port N] [--data DIR] [--transport-port N]
 * [--cluster-name NAME] [--no-parent-watch] [--health-timeout SECONDS]}
 *
 * <p>Environment fallbacks: {@code OPENSEARCH_PORT}, {@code OPENSEARCH_DATA_DIR},
 * {@code OPENSEARCH_TRANSPORT_PORT}, {@code OPENSEARCH_PARENT_WATCH=0}.
 *
 * <p>Once the cluster is yellow or green it prints exactly one line
 * {@code OPENSEARCH_READY http://127.0.0.1:PORT} on stdout (logs go to stderr),
 * then blocks until SIGTERM/SIGINT or until its parent process dies.
 */
public final class LocalOpenSearch {

    public static final String READY_PREFIX = "OPENSEARCH_READY ";
    static final String HOST = "127.0.0.1";

    static final List<String> PLUGIN_CLASSES = List.of(
        "org.opensearch.transport.Netty4Plugin",
        "org.opensearch.painless.PainlessPlugin",
        "org.opensearch.analysis.common.CommonAnalysisPlugin",
        "org.opensearch.index.reindex.ReindexPlugin",
        "org.opensearch.knn.plugin.KNNPlugin"
    );

    /** Node's plugin-taking constructor is protected. */
    static final class PluginNode extends Node {
        PluginNode(Environment environment, Collection<Class<? extends Plugin>> plugins) {
            super(environment, plugins, true);
        }
    }

    static final class Options {
        String port = "9200";
        String transportPort = "0";
        Path dataDir;
        String clusterName = "kb-local";
        boolean parentWatch = true;
        long healthTimeoutSeconds = 170;
    }

    private LocalOpenSearch() {}

    public static void main(String[] args) {
        Options options;
        try {
            options = parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("opensearch-local: " + e.getMessage());
            System.err.println(
                "usage: LocalOpenSearch [--port N (0 = any free port)] [--data DIR] [--transport-port N]"
                    + " [--cluster-name NAME] [--no-parent-watch] [--health-timeout SECONDS]"
            );
            System.exit(2);
            return;
        }
        try {
            run(options);
        } catch (Throwable t) {
            System.err.println("opensearch-local: failed to start: " + t);
            t.printStackTrace(System.err);
            // exit runs the shutdown hook (closes the node, deletes the temp home);
            // halt if that hangs.
            Thread halter = new Thread(() -> {
                try {
                    Thread.sleep(30_000);
                } catch (InterruptedException e) {
                    // fall through
                }
                Runtime.getRuntime().halt(1);
            }, "opensearch-local-halt");
            halter.setDaemon(true);
            halter.start();
            System.exit(1);
        }
    }

    static Options parse(String[] args) {
        Options o = new Options();
        env("OPENSEARCH_PORT").ifPresent(v -> o.port = v);
        env("OPENSEARCH_TRANSPORT_PORT").ifPresent(v -> o.transportPort = v);
        env("OPENSEARCH_DATA_DIR").ifPresent(v -> o.dataDir = Paths.get(v));
        env("OPENSEARCH_PARENT_WATCH").ifPresent(v -> o.parentWatch = !v.equals("0") && !v.equalsIgnoreCase("false"));
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--port":
                    o.port = value(args, ++i, a);
                    break;
                case "--transport-port":
                    o.transportPort = value(args, ++i, a);
                    break;
                case "--data":
                    o.dataDir = Paths.get(value(args, ++i, a));
                    break;
                case "--cluster-name":
                    o.clusterName = value(args, ++i, a);
                    break;
                case "--no-parent-watch":
                    o.parentWatch = false;
                    break;
                case "--health-timeout":
                    o.healthTimeoutSeconds = Long.parseLong(value(args, ++i, a));
                    break;
                default:
                    throw new IllegalArgumentException("unknown argument: " + a);
            }
        }
        checkPort(o.port, "--port");
        checkPort(o.transportPort, "--transport-port");
        return o;
    }

    private static Optional<String> env(String name) {
        String v = System.getenv(name);
        return v == null || v.isBlank() ? Optional.empty() : Optional.of(v.trim());
    }

    private static String value(String[] args, int i, String flag) {
        if (i >= args.length) {
            throw new IllegalArgumentException(flag + " needs a value");
        }
        return args[i];
    }

    private static void checkPort(String port, String flag) {
        try {
            int p = Integer.parseInt(port);
            if (p < 0 || p > 65535) {
                throw new NumberFormatException();
            }
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(flag + " must be a port number (0-65535), got: " + port);
        }
    }

    @SuppressWarnings("unchecked")
    static List<Class<? extends Plugin>> pluginClasses() throws ClassNotFoundException {
        List<Class<? extends Plugin>> classes = new ArrayList<>();
        for (String name : PLUGIN_CLASSES) {
            classes.add((Class<? extends Plugin>) Class.forName(name).asSubclass(Plugin.class));
        }
        return classes;
    }

    static void run(Options o) throws Exception {
        // path.home holds config/, modules/, plugins/ (all empty) and logs/: always
        // throw-away. The data dir is kept only when the caller gave one.
        Path home = Files.createTempDirectory("opensearch-local-home-");
        for (String dir : new String[] { "config", "modules", "plugins", "logs" }) {
            Files.createDirectories(home.resolve(dir));
        }
        Path data = o.dataDir != null ? o.dataDir.toAbsolutePath() : home.resolve("data");
        Files.createDirectories(data);

        Settings settings = Settings.builder()
            .put("cluster.name", o.clusterName)
            .put("node.name", "node-1")
            .put("path.home", home.toString())
            .put("path.data", data.toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("discovery.type", "single-node")
            .put("network.host", HOST)
            .put("http.port", o.port)
            .put("transport.port", o.transportPort)
            .put("http.type", "netty4")
            .put("transport.type", "netty4")
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .put("action.auto_create_index", true)
            .build();

        Environment environment = InternalSettingsPreparer.prepareEnvironment(
            settings, Collections.emptyMap(), home.resolve("config"), () -> "node-1");
        Node node = new PluginNode(environment, pluginClasses());
        Logger log = LogManager.getLogger(LocalOpenSearch.class);

        CountDownLatch stopped = new CountDownLatch(1);
        Thread shutdown = new Thread(() -> {
            try {
                log.info("opensearch-local: stopping");
                node.close();
                if (!node.awaitClose(20, TimeUnit.SECONDS)) {
                    log.warn("opensearch-local: node did not close within 20s");
                }
            } catch (Exception e) {
                log.warn("opensearch-local: error while stopping", e);
            } finally {
                deleteQuietly(home);
                stopped.countDown();
                LogManager.shutdown();
            }
        }, "opensearch-local-shutdown");
        Runtime.getRuntime().addShutdownHook(shutdown);

        if (o.parentWatch) {
            watchParent(log);
        }

        node.start();

        ClusterHealthResponse health = node.client().admin().cluster().prepareHealth()
            .setWaitForYellowStatus()
            .setTimeout(TimeValue.timeValueSeconds(o.healthTimeoutSeconds))
            .get();
        if (health.isTimedOut() || health.getStatus() == ClusterHealthStatus.RED) {
            throw new IllegalStateException("cluster did not become yellow/green: " + health.getStatus());
        }
        TransportAddress http = node.injector().getInstance(HttpServerTransport.class).boundAddress().publishAddress();
        String url = "http://" + HOST + ":" + http.getPort();
        log.info("opensearch-local: cluster {} is {}, HTTP at {} (data: {})",
            o.clusterName, health.getStatus().name().toLowerCase(Locale.ROOT), url, data);
        System.out.println(READY_PREFIX + url);
        System.out.flush();

        stopped.await();
    }

    /** Exit (running the shutdown hook) when the process that started us is gone. */
    private static void watchParent(Logger log) {
        Optional<ProcessHandle> parent = ProcessHandle.current().parent();
        if (parent.isEmpty()) {
            return;
        }
        long parentPid = parent.get().pid();
        if (parentPid <= 1) {
            return; // already orphaned/daemonised on purpose: nothing to watch
        }
        Thread watcher = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException e) {
                    return;
                }
                Optional<Long> now = ProcessHandle.current().parent().map(ProcessHandle::pid);
                boolean alive = now.isPresent() && now.get() == parentPid
                    && ProcessHandle.of(parentPid).map(ProcessHandle::isAlive).orElse(false);
                if (!alive) {
                    log.warn("opensearch-local: parent process {} is gone, exiting", parentPid);
                    System.exit(0);
                    return;
                }
            }
        }, "opensearch-local-parent-watch");
        watcher.setDaemon(true);
        watcher.start();
    }

    private static void deleteQuietly(Path dir) {
        try (Stream<Path> walk = Files.walk(dir)) {
            walk.sorted(Comparator.reverseOrder()).forEach(p -> {
                try {
                    Files.deleteIfExists(p);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            });
        } catch (IOException | UncheckedIOException e) {
            // best effort: it is a temp dir
        }
    }
}
