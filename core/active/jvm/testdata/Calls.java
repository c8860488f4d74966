import ardma.ActiveRDMA;

/** Entry points of every form, and a call from Java to native code. */
public final class Calls {
  private Calls() {}

  public static int[] noop(ActiveRDMA a, int[] args) {
    return args;
  }

  public static int[] twice(ActiveRDMA a, int[] args) {
    int[] out = new int[args.length];
    for (int i = 0; i < args.length; i++) {
      out[i] = 2 * args[i];
    }
    return out;
  }

  public static int total(ActiveRDMA a, int[] args) {
    int sum = 0;
    for (int v : args) {
      sum += v;
    }
    return sum;
  }

  /** The native listdemo.get, called from Java. */
  public static byte[] viaNative(ActiveRDMA a, byte[] args) {
    return a.call("listdemo.get", args);
  }

  /** Not an entry point: the wrong signature. */
  public static long notExported(ActiveRDMA a, int[] args) {
    return 0;
  }
}
