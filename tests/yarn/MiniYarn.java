// A YARN ResourceManager, NodeManagers and HDFS (one NameNode, one DataNode) in this JVM, from Hadoop's own mini
// clusters, as Spark's YARN suite runs them. Writes a client's core-site.xml and yarn-site.xml into the directory
// given, prints one line "READY key=value ..." and runs until it is stopped (SIGTERM: Hadoop's shutdown hooks).
//
//   java -cp <classes>:<hadoop-client-minicluster and its jars> MiniYarn CONF_DIR NODE_MANAGERS BASE_DIR
import java.io.File;
import java.io.FileOutputStream;
import java.io.OutputStream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

public class MiniYarn {
  public static void main(String[] args) throws Exception {
    File confDir = new File(args[0]);
    int nodeManagers = Integer.parseInt(args[1]);
    File base = new File(args[2]);
    Configuration conf = new YarnConfiguration();
    conf.set("hdfs.minidfs.basedir", new File(base, "hdfs").getAbsolutePath());
    conf.setInt(YarnConfiguration.NM_PMEM_MB, 6144);
    conf.setInt(YarnConfiguration.NM_VCORES, 4);
    conf.setBoolean(YarnConfiguration.NM_PMEM_CHECK_ENABLED, false);
    conf.setBoolean(YarnConfiguration.NM_VMEM_CHECK_ENABLED, false);
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, 256);
    conf.setBoolean(YarnConfiguration.NM_DISK_HEALTH_CHECK_ENABLE, false);
    // a queue for the gates, and one that admits nothing (a stopped queue refuses every submission)
    conf.set("yarn.scheduler.capacity.root.queues", "default,closed");
    conf.set("yarn.scheduler.capacity.root.default.capacity", "100");
    conf.set("yarn.scheduler.capacity.root.closed.capacity", "0");
    conf.set("yarn.scheduler.capacity.root.closed.state", "STOPPED");
    conf.set("yarn.scheduler.capacity.maximum-am-resource-percent", "0.5");
    MiniDFSCluster dfs = new MiniDFSCluster.Builder(conf).numDataNodes(1).build();
    dfs.waitActive();
    String fs = dfs.getFileSystem().getUri().toString();
    conf.set("fs.defaultFS", fs);
    MiniYARNCluster yarn = new MiniYARNCluster("theodolite", nodeManagers, 1, 1);
    yarn.init(conf);
    yarn.start();
    // what a client needs, and none of the mini clusters' test settings (their classes are on no client's path)
    Configuration client = new Configuration(false);
    client.set("fs.defaultFS", fs);
    client.set("dfs.replication", "1");
    for (String key : new String[] {YarnConfiguration.RM_ADDRESS, YarnConfiguration.RM_SCHEDULER_ADDRESS,
        YarnConfiguration.RM_WEBAPP_ADDRESS, YarnConfiguration.RM_ADMIN_ADDRESS}) {
      client.set(key, yarn.getConfig().get(key));
    }
    for (String name : new String[] {"core-site.xml", "yarn-site.xml"}) {
      try (OutputStream out = new FileOutputStream(new File(confDir, name))) {
        client.writeXml(out);
      }
    }
    System.out.println("READY fs=" + fs
        + " hdfs_web=localhost:" + dfs.getNameNode().getHttpAddress().getPort());
    System.out.flush();
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      yarn.stop();
      dfs.shutdown();
    }));
    Thread.currentThread().join();
  }
}
