import ardma.ActiveRDMA;

/** Version 1 of a class whose name version 2 shares. */
public final class Greeter {
  private Greeter() {}

  public static int execute(ActiveRDMA a, int[] args) {
    return 1;
  }
}
