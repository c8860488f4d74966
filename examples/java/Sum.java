// The README's first Java active code: Sum.execute adds up its int[] argument, next to the data.
//   javac -cp build/java/ardma-active.jar -d /tmp/j examples/java/Sum.java
//   build/bin/ardma load --kind jvm /tmp/j/Sum.class
//   build/bin/ardma exec --hex Sum.execute 0100000002000000    # int[] {1, 2} -> 03000000
import ardma.ActiveRDMA;

public final class Sum {
  private Sum() {}

  public static int[] execute(ActiveRDMA rdma, int[] args) {
    int total = 0;
    for (int v : args) {
      total += v;
    }
    return new int[] {total};
  }
}
