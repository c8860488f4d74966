import ardma.ActiveRDMA;
import ardma.ActiveRDMAException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The Active RDMA paper's first demo: a linked list in server memory, appended to and read by index.
 * A list header at L holds [next free byte, head node, length]; a node is [next, value], carved
 * out of the space after the header by FETCH_ADD. listdemo_functions.cc does the same in C++.
 */
public final class JList {
  private JList() {}

  public static byte[] append(ActiveRDMA a, byte[] args) {
    ByteBuffer in = ByteBuffer.wrap(args).order(ByteOrder.LITTLE_ENDIAN);
    long list = in.getLong();
    long value = in.getLong();
    long node = a.fetchAdd(list, 16);
    a.writeLong(node, 0);
    a.writeLong(node + 8, value);
    long head = a.readLong(list + 8);
    if (head == 0) {
      a.writeLong(list + 8, node);
    } else {
      long last = head;
      for (long next = a.readLong(last); next != 0; next = a.readLong(last)) {
        last = next;
      }
      a.writeLong(last, node);
    }
    long length = a.fetchAdd(list + 16, 1) + 1;
    return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(length).array();
  }

  public static byte[] get(ActiveRDMA a, byte[] args) {
    ByteBuffer in = ByteBuffer.wrap(args).order(ByteOrder.LITTLE_ENDIAN);
    long list = in.getLong();
    long index = in.getLong();
    long node = a.readLong(list + 8);
    for (long i = 0; i < index && node != 0; i++) {
      node = a.readLong(node);
    }
    if (node == 0) {
      throw new ActiveRDMAException(11, "no such element"); // OUT_OF_RANGE, like listdemo.get
    }
    return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(a.readLong(node + 8))
        .array();
  }
}
