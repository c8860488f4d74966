package ardma;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.jar.JarEntry;
import java.util.jar.JarInputStream;

/**
 * The server's side of loading Java active code: each shipped class file or jar gets its own class
 * loader, so two blobs may define classes of the same name. Not part of the API for active code.
 */
public final class Blob {
  private Blob() {}

  /**
   * Defines the classes of a class file or a jar in a new loader and returns their entry points as
   * {name, Method, kind} triples: kind 0 for int[] (ActiveRDMA, int[]), 1 for int (ActiveRDMA,
   * int[]), 2 for byte[] (ActiveRDMA, byte[]).
   */
  public static Object[] load(byte[] blob) throws IOException, ClassNotFoundException {
    BlobLoader loader = new BlobLoader();
    List<Class<?>> classes = new ArrayList<>();
    if (blob.length >= 4 && (blob[0] & 0xff) == 0xca && (blob[1] & 0xff) == 0xfe
        && (blob[2] & 0xff) == 0xba && (blob[3] & 0xff) == 0xbe) {
      classes.add(loader.defineWhole(blob));
    } else if (blob.length >= 4 && blob[0] == 'P' && blob[1] == 'K') {
      for (String name : loader.addJar(blob)) {
        classes.add(loader.loadClass(name));
      }
    } else {
      throw new IllegalArgumentException("neither a class file nor a jar");
    }
    List<Object> out = new ArrayList<>();
    Set<String> names = new HashSet<>();
    for (Class<?> c : classes) {
      for (Method m : c.getDeclaredMethods()) {
        int kind = kindOf(m);
        if (kind < 0) {
          continue;
        }
        String name = c.getName() + "." + m.getName();
        if (!names.add(name)) {
          throw new IllegalArgumentException("two entry points named " + name);
        }
        out.add(name);
        out.add(m);
        out.add(kind);
      }
    }
    if (out.isEmpty()) {
      throw new IllegalArgumentException(
          "no entry points: expected public static int[]|int|byte[] NAME(ActiveRDMA, int[]|byte[])");
    }
    return out.toArray();
  }

  /** Runs nothing: the server calls it to take delivery of an exception aimed at a stopped call. */
  public static void absorb() {}

  private static int kindOf(Method m) {
    int mod = m.getModifiers();
    Class<?>[] p = m.getParameterTypes();
    if (!Modifier.isPublic(mod) || !Modifier.isStatic(mod) || p.length != 2
        || p[0] != ActiveRDMA.class) {
      return -1;
    }
    Class<?> r = m.getReturnType();
    if (p[1] == int[].class && r == int[].class) {
      return 0;
    }
    if (p[1] == int[].class && r == int.class) {
      return 1;
    }
    if (p[1] == byte[].class && r == byte[].class) {
      return 2;
    }
    return -1;
  }
}

/** One blob's classes, defined on demand; everything else comes from the parent (the API). */
final class BlobLoader extends ClassLoader {
  private final Map<String, byte[]> pending = new HashMap<>();

  BlobLoader() {
    super(Blob.class.getClassLoader());
  }

  Class<?> defineWhole(byte[] classFile) {
    return defineClass(null, classFile, 0, classFile.length);
  }

  List<String> addJar(byte[] jar) throws IOException {
    List<String> names = new ArrayList<>();
    try (JarInputStream in = new JarInputStream(new ByteArrayInputStream(jar))) {
      for (JarEntry e = in.getNextJarEntry(); e != null; e = in.getNextJarEntry()) {
        String path = e.getName();
        if (e.isDirectory() || !path.endsWith(".class") || path.startsWith("META-INF/")) {
          continue;
        }
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        in.transferTo(bytes);
        String name = path.substring(0, path.length() - 6).replace('/', '.');
        pending.put(name, bytes.toByteArray());
        names.add(name);
      }
    }
    if (names.isEmpty()) {
      throw new IllegalArgumentException("the jar holds no classes");
    }
    return names;
  }

  @Override
  protected Class<?> findClass(String name) throws ClassNotFoundException {
    byte[] bytes = pending.remove(name);
    if (bytes == null) {
      throw new ClassNotFoundException(name);
    }
    return defineClass(name, bytes, 0, bytes.length);
  }
}
