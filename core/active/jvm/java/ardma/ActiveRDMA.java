package ardma;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * What Java active code is written against: the Active RDMA paper's ActiveRDMA, backed by the server's
 * context of the request that runs the code. Addresses are byte offsets into the server's heap
 * (region 0); words are little-endian. Every access is bounds-checked: a bad one throws
 * {@link ActiveRDMAException} with code OUT_OF_RANGE, which becomes the request's status unless
 * the code catches it.
 *
 * <p>An entry point is a public static method of one of these forms; it is exported as
 * "ClassName.methodName":
 *
 * <pre>
 *   public static int[] execute(ActiveRDMA a, int[] args)
 *   public static int execute(ActiveRDMA a, int[] args)
 *   public static byte[] execute(ActiveRDMA a, byte[] args)
 * </pre>
 *
 * <p>An int[] travels as little-endian 32-bit words. The object is valid only while the request
 * that received it runs.
 */
public final class ActiveRDMA {
  private long handle; // the server's Context of the running request; 0 once it is over

  private ActiveRDMA(long handle) {
    this.handle = handle;
  }

  public byte[] read(long addr, int length) {
    return nRead(handle(), addr, length);
  }

  public void write(long addr, byte[] data) {
    nWrite(handle(), addr, data);
  }

  public int readInt(long addr) {
    return ByteBuffer.wrap(read(addr, 4)).order(ByteOrder.LITTLE_ENDIAN).getInt();
  }

  public void writeInt(long addr, int value) {
    write(addr, ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(value).array());
  }

  public long readLong(long addr) {
    return nReadLong(handle(), addr);
  }

  public void writeLong(long addr, long value) {
    nWriteLong(handle(), addr, value);
  }

  public int[] readInts(long addr, int count) {
    return toInts(read(addr, 4 * count));
  }

  public void writeInts(long addr, int[] values) {
    write(addr, toBytes(values));
  }

  /**
   * Atomically replaces the 8-byte word at addr (8-byte aligned) with desired if it holds
   * expected. Returns the value it held: the swap happened if and only if that equals expected.
   */
  public long compareAndSwap(long addr, long expected, long desired) {
    return nCompareAndSwap(handle(), addr, expected, desired);
  }

  /** Atomically adds delta to the 8-byte word at addr; returns the value before. */
  public long fetchAdd(long addr, long delta) {
    return nFetchAdd(handle(), addr, delta);
  }

  /** Calls another active function on the server (native or Java) by name, e.g. "dht.put". */
  public byte[] call(String function, byte[] args) {
    return nCall(handle(), function, args);
  }

  public int[] call(String function, int[] args) {
    return toInts(call(function, toBytes(args)));
  }

  public static byte[] toBytes(int[] values) {
    ByteBuffer b = ByteBuffer.allocate(4 * values.length).order(ByteOrder.LITTLE_ENDIAN);
    for (int v : values) {
      b.putInt(v);
    }
    return b.array();
  }

  public static int[] toInts(byte[] bytes) {
    if (bytes.length % 4 != 0) {
      throw new IllegalArgumentException(bytes.length + " bytes are not a whole number of ints");
    }
    int[] out = new int[bytes.length / 4];
    ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer().get(out);
    return out;
  }

  private long handle() {
    if (handle == 0) {
      throw new IllegalStateException("ActiveRDMA used after its request ended");
    }
    return handle;
  }

  private static native byte[] nRead(long handle, long addr, int length);

  private static native void nWrite(long handle, long addr, byte[] data);

  private static native long nReadLong(long handle, long addr);

  private static native void nWriteLong(long handle, long addr, long value);

  private static native long nCompareAndSwap(long handle, long addr, long expected, long desired);

  private static native long nFetchAdd(long handle, long addr, long delta);

  private static native byte[] nCall(long handle, String function, byte[] args);
}
