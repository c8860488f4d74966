package ardma;

import java.security.Permission;

/**
 * Installed by the server when its JVM starts: active code may not end the server's process
 * (System.exit, Runtime.halt). Everything else is permitted, as without a security manager.
 */
@SuppressWarnings("removal")
final class ExitGuard extends SecurityManager {
  private ExitGuard() {}

  /** Called by the server, once. False when this JDK no longer allows a security manager. */
  static boolean install() {
    try {
      System.setSecurityManager(new ExitGuard());
      return true;
    } catch (UnsupportedOperationException e) {
      return false;
    }
  }

  @Override
  public void checkExit(int status) {
    throw new SecurityException(
        "active code may not end the server (System.exit(" + status + ") refused)");
  }

  @Override
  public void checkPermission(Permission perm) {}

  @Override
  public void checkPermission(Permission perm, Object context) {}
}
