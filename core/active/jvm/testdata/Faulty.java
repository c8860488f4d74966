import ardma.ActiveRDMA;

/** Code that fails: each failure must become the right error and leave the server serving. */
public final class Faulty {
  private Faulty() {}

  public static int[] boom(ActiveRDMA a, int[] args) {
    throw new IllegalStateException("boom");
  }

  public static int[] outOfRange(ActiveRDMA a, int[] args) {
    a.readLong(1L << 60);
    return args;
  }

  public static int[] spin(ActiveRDMA a, int[] args) {
    long x = 0;
    while (true) {
      x = x * 31 + 7;
    }
  }

  /** Never returns, and survives what the JVM can do to stop it (interrupt, Thread.stop). */
  public static int[] stubborn(ActiveRDMA a, int[] args) {
    long x = 0;
    while (true) {
      try {
        while (true) {
          x = x * 31 + 7;
        }
      } catch (ThreadDeath death) {
        x++;  // and on
      }
    }
  }

  /** Tries to end the server's process: refused. */
  public static int[] exit(ActiveRDMA a, int[] args) {
    System.exit(3);
    return args;
  }

  public static int[] halt(ActiveRDMA a, int[] args) {
    Runtime.getRuntime().halt(4);
    return args;
  }

  /** Keeps the ActiveRDMA past its request and uses it later: refused. */
  private static ActiveRDMA kept;

  public static int[] keep(ActiveRDMA a, int[] args) {
    kept = a;
    return args;
  }

  public static int[] useKept(ActiveRDMA a, int[] args) {
    kept.readLong(0);
    return args;
  }
}
