import ardma.ActiveRDMA;

/** Version 2 of Greeter, shipped as a jar. */
public final class Greeter {
  private Greeter() {}

  public static int execute(ActiveRDMA a, int[] args) {
    return 2;
  }
}
