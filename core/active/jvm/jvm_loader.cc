#include "core/active/jvm/jvm_loader.h"

#include <dlfcn.h>
#include <jni.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/active/local_context.h"
#include "core/log.h"
#include "core/status_macros.h"

// The API jar (core/active/jvm/java), embedded by the build.
extern "C" const unsigned char ardma_jvm_api_jar_begin[];
extern "C" const unsigned char ardma_jvm_api_jar_end[];

namespace ardma {
namespace {

constexpr absl::Duration kStopGrace = absl::Milliseconds(20);
// The JVM's heap when ardmad --jvm-options names no cap: an unbounded heap grew to 4.9 GB and
// then failed every Java call while it collected.
constexpr char kDefaultHeapCap[] = "-Xmx1g";
constexpr absl::Duration kWatchPeriod = absl::Milliseconds(2);

enum EntryKind { kIntsToInts = 0, kIntsToInt = 1, kBytesToBytes = 2 };

// A local reference frame for the scope.
class LocalFrame {
 public:
  LocalFrame(JNIEnv* env, int capacity) : env_(env) { env_->PushLocalFrame(capacity); }
  ~LocalFrame() { env_->PopLocalFrame(nullptr); }

 private:
  JNIEnv* env_;
};

std::string JavaString(JNIEnv* env, jstring s) {
  if (s == nullptr) return "";
  const char* chars = env->GetStringUTFChars(s, nullptr);
  std::string out = chars ? chars : "";
  if (chars) env->ReleaseStringUTFChars(s, chars);
  return out;
}

class Jvm;

// Running Java calls and their deadlines. Past a deadline the watchdog interrupts the calling
// thread, and kStopGrace later stops it (Thread.stop: an asynchronous ThreadDeath, which also ends
// a loop that never checks for interruption).
class Watchdog {
 public:
  explicit Watchdog(Jvm* jvm) : jvm_(jvm) {}
  void Start();
  // Registers a call running on the thread whose java.lang.Thread is `thread` (a global ref).
  uint64_t Watch(jobject thread, absl::Time deadline);
  // Ends the watch; true if the watchdog acted on the call (it ran past its deadline).
  bool Unwatch(uint64_t id);

 private:
  struct Call {
    jobject thread;
    absl::Time deadline;
    int stage = 0;  // 0 running, 1 interrupted, 2 stopped
    absl::Time acted;
  };
  void Run();

  Jvm* jvm_;
  absl::Mutex mu_;
  std::map<uint64_t, Call> calls_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool warned_ ABSL_GUARDED_BY(mu_) = false;
};

class Jvm {
 public:
  // The process's JVM, started on the first call with `options`.
  static absl::StatusOr<Jvm*> Get(const JvmOptions& options);

  // The calling thread's JNIEnv; attaches the thread (as a daemon) on its first use.
  absl::StatusOr<JNIEnv*> Env();
  // The calling thread's java.lang.Thread (a global reference).
  jobject CurrentThread();
  Watchdog& watchdog() { return watchdog_; }

  // Status of a Throwable thrown by Java code.
  absl::Status StatusOf(JNIEnv* env, jthrowable t, bool deadline_passed);
  // Throws a Java ActiveRDMAException for `status` in `env`.
  void Throw(JNIEnv* env, const absl::Status& status);

  // Cached classes (global refs) and members.
  jclass api, api_error, blob, thread, method, integer, throwable, klass;
  jmethodID api_ctor, api_error_ctor, blob_load, blob_absorb, thread_current, thread_interrupt,
      thread_stop, thread_interrupted, method_declaring_class, integer_value, throwable_message,
      class_name;
  jfieldID api_handle, api_error_code;

 private:
  Jvm() : watchdog_(this) {}
  absl::Status Start(const JvmOptions& options);
  absl::Status Bind(JNIEnv* env);

  JavaVM* vm_ = nullptr;
  Watchdog watchdog_;
};

struct Attachment {
  JavaVM* vm = nullptr;
  JNIEnv* env = nullptr;
  jobject thread = nullptr;  // global ref to this thread's java.lang.Thread
  ~Attachment() {
    if (vm == nullptr) return;
    if (thread) env->DeleteGlobalRef(thread);
    vm->DetachCurrentThread();
  }
};
thread_local Attachment attachment;

absl::StatusOr<Jvm*> Jvm::Get(const JvmOptions& options) {
  static absl::Mutex mu(absl::kConstInit);
  static Jvm* jvm = nullptr;
  static absl::Status failed;
  absl::MutexLock lock(&mu);
  if (jvm != nullptr) return jvm;
  if (!failed.ok()) return failed;  // a JVM cannot be created again once creation failed
  auto* created = new Jvm();
  absl::Status started = created->Start(options);
  if (!started.ok()) {
    failed = started;
    return started;
  }
  jvm = created;  // lives for the process: JNI cannot create a second JVM
  return jvm;
}

absl::Status Jvm::Start(const JvmOptions& options) {
  std::string lib = options.libjvm.empty() ? ARDMA_DEFAULT_LIBJVM : options.libjvm;
  void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot start the JVM: ", dlerror(), " (install a JDK 17 or give ardmad --jvm-lib)"));
  }
  using CreateFn = jint (*)(JavaVM**, void**, void*);
  auto create = reinterpret_cast<CreateFn>(dlsym(handle, "JNI_CreateJavaVM"));
  if (create == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(lib, " has no JNI_CreateJavaVM"));
  }
  // The API jar goes on the class path from an anonymous file that stays open for good.
  int fd = memfd_create("ardma-active.jar", MFD_CLOEXEC);
  size_t size = static_cast<size_t>(ardma_jvm_api_jar_end - ardma_jvm_api_jar_begin);
  if (fd < 0 || write(fd, ardma_jvm_api_jar_begin, size) != static_cast<ssize_t>(size)) {
    return absl::InternalError("cannot stage the ardma API jar for the JVM");
  }
  std::string classpath = absl::StrCat("-Djava.class.path=/proc/self/fd/", fd);
  if (!options.classpath.empty()) absl::StrAppend(&classpath, ":", options.classpath);
  // -Djava.security.manager=allow: so that ExitGuard may refuse System.exit (Bind).
  std::vector<std::string> strings = {classpath, "-Xrs", "-XX:-UsePerfData",
                                      "-Djava.security.manager=allow"};
  strings.insert(strings.end(), options.options.begin(), options.options.end());
  // A heap cap unless the options give one: an unbounded heap grows with the host's memory.
  bool capped = false;
  for (const std::string& o : options.options) {
    if (absl::StartsWith(o, "-Xmx") || absl::StartsWith(o, "-XX:MaxHeapSize") ||
        absl::StartsWith(o, "-XX:MaxRAM")) {
      capped = true;
    }
  }
  if (!capped) strings.push_back(kDefaultHeapCap);
  std::vector<JavaVMOption> vm_options(strings.size());
  for (size_t i = 0; i < strings.size(); ++i) {
    vm_options[i].optionString = strings[i].data();
  }
  JavaVMInitArgs args{};
  args.version = JNI_VERSION_10;
  args.nOptions = static_cast<jint>(vm_options.size());
  args.options = vm_options.data();
  args.ignoreUnrecognized = JNI_FALSE;
  JNIEnv* env = nullptr;
  jint rc = create(&vm_, reinterpret_cast<void**>(&env), &args);
  if (rc != JNI_OK) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the JVM did not start (JNI error ", rc, ") with options: ", absl::StrJoin(strings, " ")));
  }
  // The creating thread is attached; it detaches when it exits, like every other.
  attachment.vm = vm_;
  attachment.env = env;
  ARDMA_RETURN_IF_ERROR(Bind(env));
  watchdog_.Start();
  ARDMA_LOG(kInfo, "JVM started (%s)", absl::StrJoin(strings, " "));
  return absl::OkStatus();
}

// Java -> server: the natives of ardma.ActiveRDMA. `handle` is the request's Context.
Jvm* the_jvm = nullptr;

Context* ContextOf(JNIEnv* env, jlong handle) {
  return reinterpret_cast<Context*>(handle);
}

jbyteArray ToJavaBytes(JNIEnv* env, std::string_view bytes) {
  jbyteArray a = env->NewByteArray(static_cast<jsize>(bytes.size()));
  if (a != nullptr) {
    env->SetByteArrayRegion(a, 0, static_cast<jsize>(bytes.size()),
                            reinterpret_cast<const jbyte*>(bytes.data()));
  }
  return a;
}

std::string FromJavaBytes(JNIEnv* env, jbyteArray a) {
  if (a == nullptr) return "";
  std::string out(static_cast<size_t>(env->GetArrayLength(a)), '\0');
  env->GetByteArrayRegion(a, 0, static_cast<jsize>(out.size()), reinterpret_cast<jbyte*>(out.data()));
  return out;
}

jbyteArray NativeRead(JNIEnv* env, jclass, jlong h, jlong addr, jint length) {
  if (length < 0) {
    the_jvm->Throw(env, absl::InvalidArgumentError("negative length"));
    return nullptr;
  }
  absl::StatusOr<std::string> bytes =
      ContextOf(env, h)->Read(static_cast<uint64_t>(addr), static_cast<size_t>(length));
  if (!bytes.ok()) {
    the_jvm->Throw(env, bytes.status());
    return nullptr;
  }
  return ToJavaBytes(env, *bytes);
}

void NativeWrite(JNIEnv* env, jclass, jlong h, jlong addr, jbyteArray data) {
  std::string bytes = FromJavaBytes(env, data);
  absl::Status s = ContextOf(env, h)->Write(static_cast<uint64_t>(addr), bytes);
  if (!s.ok()) the_jvm->Throw(env, s);
}

jlong NativeReadLong(JNIEnv* env, jclass, jlong h, jlong addr) {
  absl::StatusOr<uint64_t> v = ContextOf(env, h)->ReadU64(static_cast<uint64_t>(addr));
  if (!v.ok()) {
    the_jvm->Throw(env, v.status());
    return 0;
  }
  return static_cast<jlong>(*v);
}

void NativeWriteLong(JNIEnv* env, jclass, jlong h, jlong addr, jlong value) {
  absl::Status s =
      ContextOf(env, h)->WriteU64(static_cast<uint64_t>(addr), static_cast<uint64_t>(value));
  if (!s.ok()) the_jvm->Throw(env, s);
}

jlong NativeCompareAndSwap(JNIEnv* env, jclass, jlong h, jlong addr, jlong expected,
                           jlong desired) {
  absl::StatusOr<CasResult> r = ContextOf(env, h)->CompareAndSwap(
      static_cast<uint64_t>(addr), static_cast<uint64_t>(expected),
      static_cast<uint64_t>(desired));
  if (!r.ok()) {
    the_jvm->Throw(env, r.status());
    return 0;
  }
  return static_cast<jlong>(r->observed);
}

jlong NativeFetchAdd(JNIEnv* env, jclass, jlong h, jlong addr, jlong delta) {
  absl::StatusOr<uint64_t> r =
      ContextOf(env, h)->FetchAdd(static_cast<uint64_t>(addr), static_cast<uint64_t>(delta));
  if (!r.ok()) {
    the_jvm->Throw(env, r.status());
    return 0;
  }
  return static_cast<jlong>(*r);
}

jbyteArray NativeCall(JNIEnv* env, jclass, jlong h, jstring function, jbyteArray args) {
  if (function == nullptr) {
    the_jvm->Throw(env, absl::InvalidArgumentError("call: null function name"));
    return nullptr;
  }
  std::string name = JavaString(env, function);
  std::string bytes = FromJavaBytes(env, args);
  absl::StatusOr<std::string> result = ContextOf(env, h)->Call(name, bytes);
  if (!result.ok()) {
    the_jvm->Throw(env, result.status());
    return nullptr;
  }
  return ToJavaBytes(env, *result);
}

absl::Status Jvm::Bind(JNIEnv* env) {
  auto global_class = [&](const char* name) -> jclass {
    jclass local = env->FindClass(name);
    if (local == nullptr) {
      env->ExceptionClear();
      return nullptr;
    }
    auto global = static_cast<jclass>(env->NewGlobalRef(local));
    env->DeleteLocalRef(local);
    return global;
  };
  api = global_class("ardma/ActiveRDMA");
  api_error = global_class("ardma/ActiveRDMAException");
  blob = global_class("ardma/Blob");
  thread = global_class("java/lang/Thread");
  method = global_class("java/lang/reflect/Method");
  integer = global_class("java/lang/Integer");
  throwable = global_class("java/lang/Throwable");
  klass = global_class("java/lang/Class");
  if (!api || !api_error || !blob || !thread || !method || !integer || !throwable || !klass) {
    return absl::InternalError("the JVM lacks the ardma API classes");
  }
  api_ctor = env->GetMethodID(api, "<init>", "(J)V");
  api_handle = env->GetFieldID(api, "handle", "J");
  api_error_ctor = env->GetMethodID(api_error, "<init>", "(ILjava/lang/String;)V");
  api_error_code = env->GetFieldID(api_error, "code", "I");
  blob_load = env->GetStaticMethodID(blob, "load", "([B)[Ljava/lang/Object;");
  blob_absorb = env->GetStaticMethodID(blob, "absorb", "()V");
  thread_current = env->GetStaticMethodID(thread, "currentThread", "()Ljava/lang/Thread;");
  thread_interrupt = env->GetMethodID(thread, "interrupt", "()V");
  thread_stop = env->GetMethodID(thread, "stop", "()V");
  thread_interrupted = env->GetStaticMethodID(thread, "interrupted", "()Z");
  method_declaring_class = env->GetMethodID(method, "getDeclaringClass", "()Ljava/lang/Class;");
  integer_value = env->GetMethodID(integer, "intValue", "()I");
  throwable_message = env->GetMethodID(throwable, "getMessage", "()Ljava/lang/String;");
  class_name = env->GetMethodID(klass, "getName", "()Ljava/lang/String;");
  if (env->ExceptionCheck()) {
    env->ExceptionClear();
    return absl::InternalError("the ardma API classes do not match this server");
  }
  // Active code may not end the server: System.exit and Runtime.halt throw SecurityException.
  jclass guard = env->FindClass("ardma/ExitGuard");
  jmethodID install =
      guard != nullptr ? env->GetStaticMethodID(guard, "install", "()Z") : nullptr;
  if (install == nullptr || env->CallStaticBooleanMethod(guard, install) != JNI_TRUE ||
      env->ExceptionCheck()) {
    env->ExceptionClear();
    ARDMA_LOG(kWarning, "this JDK cannot refuse System.exit: Java code can end the server");
  }
  if (guard != nullptr) env->DeleteLocalRef(guard);
  const JNINativeMethod natives[] = {
      {const_cast<char*>("nRead"), const_cast<char*>("(JJI)[B"),
       reinterpret_cast<void*>(&NativeRead)},
      {const_cast<char*>("nWrite"), const_cast<char*>("(JJ[B)V"),
       reinterpret_cast<void*>(&NativeWrite)},
      {const_cast<char*>("nReadLong"), const_cast<char*>("(JJ)J"),
       reinterpret_cast<void*>(&NativeReadLong)},
      {const_cast<char*>("nWriteLong"), const_cast<char*>("(JJJ)V"),
       reinterpret_cast<void*>(&NativeWriteLong)},
      {const_cast<char*>("nCompareAndSwap"), const_cast<char*>("(JJJJ)J"),
       reinterpret_cast<void*>(&NativeCompareAndSwap)},
      {const_cast<char*>("nFetchAdd"), const_cast<char*>("(JJJ)J"),
       reinterpret_cast<void*>(&NativeFetchAdd)},
      {const_cast<char*>("nCall"), const_cast<char*>("(JLjava/lang/String;[B)[B"),
       reinterpret_cast<void*>(&NativeCall)},
  };
  the_jvm = this;
  if (env->RegisterNatives(api, natives, std::size(natives)) != JNI_OK) {
    env->ExceptionClear();
    return absl::InternalError("cannot bind ardma.ActiveRDMA's native methods");
  }
  return absl::OkStatus();
}

absl::StatusOr<JNIEnv*> Jvm::Env() {
  if (attachment.env != nullptr) return attachment.env;
  JNIEnv* env = nullptr;
  JavaVMAttachArgs args{JNI_VERSION_10, const_cast<char*>("ardma-active"), nullptr};
  if (vm_->AttachCurrentThreadAsDaemon(reinterpret_cast<void**>(&env), &args) != JNI_OK) {
    return absl::ResourceExhaustedError("cannot attach the thread to the JVM");
  }
  attachment.vm = vm_;
  attachment.env = env;
  return env;
}

jobject Jvm::CurrentThread() {
  if (attachment.thread == nullptr) {
    JNIEnv* env = attachment.env;
    jobject t = env->CallStaticObjectMethod(thread, thread_current);
    attachment.thread = env->NewGlobalRef(t);
    env->DeleteLocalRef(t);
  }
  return attachment.thread;
}

absl::Status Jvm::StatusOf(JNIEnv* env, jthrowable t, bool deadline_passed) {
  LocalFrame frame(env, 8);
  if (env->IsInstanceOf(t, api_error)) {
    int code = env->GetIntField(t, api_error_code);
    std::string message =
        JavaString(env, static_cast<jstring>(env->CallObjectMethod(t, throwable_message)));
    return absl::Status(static_cast<absl::StatusCode>(code), message);
  }
  if (deadline_passed) {
    return absl::DeadlineExceededError("Java active code ran past its deadline and was stopped");
  }
  jobject cls = env->CallObjectMethod(t, env->GetMethodID(throwable, "getClass",
                                                          "()Ljava/lang/Class;"));
  std::string name = JavaString(env, static_cast<jstring>(env->CallObjectMethod(cls, class_name)));
  std::string message =
      JavaString(env, static_cast<jstring>(env->CallObjectMethod(t, throwable_message)));
  env->ExceptionClear();
  return absl::UnknownError(message.empty() ? name : absl::StrCat(name, ": ", message));
}

void Jvm::Throw(JNIEnv* env, const absl::Status& status) {
  jstring message = env->NewStringUTF(std::string(status.message()).c_str());
  auto e = static_cast<jthrowable>(
      env->NewObject(api_error, api_error_ctor, static_cast<jint>(status.code()), message));
  if (e != nullptr) env->Throw(e);
}

void Watchdog::Start() {
  std::thread([this] { Run(); }).detach();
}

uint64_t Watchdog::Watch(jobject thread, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  uint64_t id = next_id_++;
  calls_[id] = Call{thread, deadline};
  return id;
}

bool Watchdog::Unwatch(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(id);
  bool acted = it->second.stage > 0;
  calls_.erase(it);
  return acted;
}

void Watchdog::Run() {
  absl::StatusOr<JNIEnv*> env = jvm_->Env();
  if (!env.ok()) return;
  for (;;) {
    absl::SleepFor(kWatchPeriod);
    absl::Time now = absl::Now();
    // Acting under the lock: a call cannot end (Unwatch) while its thread is being interrupted
    // or stopped, so the action never lands on the thread's next call.
    absl::MutexLock lock(&mu_);
    for (auto& [id, call] : calls_) {
      if (call.stage == 0 && now > call.deadline) {
        (*env)->CallVoidMethod(call.thread, jvm_->thread_interrupt);
        call.stage = 1;
        call.acted = now;
      } else if (call.stage == 1 && now > call.acted + kStopGrace) {
        (*env)->CallVoidMethod(call.thread, jvm_->thread_stop);
        call.stage = 2;
        if ((*env)->ExceptionCheck() && !warned_) {
          warned_ = true;  // JDK 20 and later removed Thread.stop
          ARDMA_LOG(kWarning,
                    "this JVM cannot stop a thread: Java code that ignores interrupts runs past "
                    "its deadline (use a JDK 17)");
        }
      }
      (*env)->ExceptionClear();
    }
  }
}

class JvmLibrary : public LoadedLibrary {
 public:
  struct Entry {
    std::string name;
    jclass owner;  // global ref: keeps the class, and so its loader, alive
    jmethodID method;
    EntryKind kind;
  };
  JvmLibrary(Jvm* jvm, std::string name, std::vector<Entry> entries)
      : jvm_(jvm), name_(std::move(name)), entries_(std::move(entries)) {}

  std::string_view name() const override { return name_; }
  size_t num_functions() const override { return entries_.size(); }
  std::string_view function_name(size_t i) const override { return entries_[i].name; }
  absl::StatusOr<std::string> Run(size_t index, Context& ctx, std::string_view args) override;

 private:
  Jvm* jvm_;
  std::string name_;
  std::vector<Entry> entries_;
};

absl::StatusOr<std::string> JvmLibrary::Run(size_t index, Context& ctx, std::string_view args) {
  const Entry& e = entries_[index];
  ARDMA_ASSIGN_OR_RETURN(JNIEnv * env, jvm_->Env());
  LocalFrame frame(env, 16);
  jobject api = env->NewObject(jvm_->api, jvm_->api_ctor, reinterpret_cast<jlong>(&ctx));
  jarray in;
  if (e.kind == kBytesToBytes) {
    in = ToJavaBytes(env, args);
  } else {
    if (args.size() % 4 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(e.name, " takes int[] arguments: whole 4-byte words, not ", args.size(),
                       " bytes"));
    }
    jintArray ints = env->NewIntArray(static_cast<jsize>(args.size() / 4));
    if (ints) {
      env->SetIntArrayRegion(ints, 0, static_cast<jsize>(args.size() / 4),
                             reinterpret_cast<const jint*>(args.data()));
    }
    in = ints;
  }
  if (api == nullptr || in == nullptr) {
    env->ExceptionClear();
    return absl::ResourceExhaustedError("the JVM is out of memory");
  }
  auto* local = dynamic_cast<LocalContext*>(&ctx);
  absl::Time deadline = local ? local->execution().deadline : absl::InfiniteFuture();
  uint64_t watch = jvm_->watchdog().Watch(jvm_->CurrentThread(), deadline);
  jobject out_object = nullptr;
  jint out_int = 0;
  if (e.kind == kIntsToInt) {
    out_int = env->CallStaticIntMethod(e.owner, e.method, api, in);
  } else {
    out_object = env->CallStaticObjectMethod(e.owner, e.method, api, in);
  }
  bool acted = jvm_->watchdog().Unwatch(watch);
  env->SetLongField(api, jvm_->api_handle, 0);  // a kept reference can no longer reach memory
  jthrowable thrown = env->ExceptionOccurred();
  env->ExceptionClear();
  if (acted) {
    // Take delivery of a stop aimed at this call, and clear the interrupt, so neither reaches the
    // thread's next request.
    env->CallStaticVoidMethod(jvm_->blob, jvm_->blob_absorb);
    env->ExceptionClear();
    env->CallStaticBooleanMethod(jvm_->thread, jvm_->thread_interrupted);
    env->ExceptionClear();
  }
  if (thrown != nullptr) return jvm_->StatusOf(env, thrown, acted || absl::Now() > deadline);
  switch (e.kind) {
    case kIntsToInt:
      return std::string(reinterpret_cast<const char*>(&out_int), 4);
    case kIntsToInts: {
      if (out_object == nullptr) return std::string();
      auto ints = static_cast<jintArray>(out_object);
      std::string out(4 * static_cast<size_t>(env->GetArrayLength(ints)), '\0');
      env->GetIntArrayRegion(ints, 0, env->GetArrayLength(ints), reinterpret_cast<jint*>(out.data()));
      return out;
    }
    case kBytesToBytes:
      return FromJavaBytes(env, static_cast<jbyteArray>(out_object));
  }
  return absl::InternalError("unknown entry kind");
}

class JvmLoader : public CodeLoader {
 public:
  explicit JvmLoader(JvmOptions options) : options_(std::move(options)) {}

  absl::StatusOr<std::unique_ptr<LoadedLibrary>> Load(std::string_view library_name,
                                                      std::string_view code) override {
    ARDMA_ASSIGN_OR_RETURN(Jvm * jvm, Jvm::Get(options_));
    ARDMA_ASSIGN_OR_RETURN(JNIEnv * env, jvm->Env());
    LocalFrame frame(env, 64);
    jbyteArray blob = ToJavaBytes(env, code);
    auto found = static_cast<jobjectArray>(env->CallStaticObjectMethod(jvm->blob, jvm->blob_load, blob));
    if (jthrowable thrown = env->ExceptionOccurred()) {
      env->ExceptionClear();
      absl::Status s = jvm->StatusOf(env, thrown, false);
      return absl::InvalidArgumentError(absl::StrCat("not loadable Java code: ", s.message()));
    }
    std::vector<JvmLibrary::Entry> entries;
    jsize n = env->GetArrayLength(found);
    for (jsize i = 0; i + 2 < n; i += 3) {
      LocalFrame entry_frame(env, 8);
      JvmLibrary::Entry e;
      e.name = JavaString(env, static_cast<jstring>(env->GetObjectArrayElement(found, i)));
      jobject reflected = env->GetObjectArrayElement(found, i + 1);
      e.method = env->FromReflectedMethod(reflected);
      jobject owner = env->CallObjectMethod(reflected, jvm->method_declaring_class);
      e.owner = static_cast<jclass>(env->NewGlobalRef(owner));
      e.kind = static_cast<EntryKind>(
          env->CallIntMethod(env->GetObjectArrayElement(found, i + 2), jvm->integer_value));
      entries.push_back(std::move(e));
    }
    if (env->ExceptionCheck() || entries.empty()) {
      env->ExceptionClear();
      return absl::InternalError("could not read the entry points of the Java code");
    }
    std::string name(library_name);
    if (name.empty()) name = entries[0].name.substr(0, entries[0].name.rfind('.'));
    return std::make_unique<JvmLibrary>(jvm, std::move(name), std::move(entries));
  }

 private:
  JvmOptions options_;
};

}  // namespace

bool JvmBuiltIn() { return true; }

std::string JvmDefaultLibrary() { return ARDMA_DEFAULT_LIBJVM; }

std::unique_ptr<CodeLoader> NewJvmLoader(const JvmOptions& options) {
  return std::make_unique<JvmLoader>(options);
}

absl::Status StartJvm(const JvmOptions& options) { return Jvm::Get(options).status(); }

}  // namespace ardma
