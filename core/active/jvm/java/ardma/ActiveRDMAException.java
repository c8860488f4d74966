package ardma;

/**
 * A failed server operation (an access out of range, a call to a missing function, a deadline
 * passed, ...). Uncaught, it becomes the request's status with the same code and message.
 */
public final class ActiveRDMAException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** The status code, numbered as gRPC and Abseil number them (e.g. 11 OUT_OF_RANGE). */
  public final int code;

  public ActiveRDMAException(int code, String message) {
    super(message);
    this.code = code;
  }
}
