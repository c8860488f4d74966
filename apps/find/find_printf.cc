// -printf and -ls for ardma-find, as GNU find formats them (find(1): "-printf format").
#include <cerrno>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "apps/find/find_format.h"

namespace ardma::find {
namespace {

std::string_view Basename(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos || path.size() == 1) return path;
  return path.substr(slash + 1);
}

std::string_view Dirname(std::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  return slash == 0 ? path.substr(0, 1) : path.substr(0, slash);
}

char TypeLetter(dfs::FileType t) {
  return t == dfs::FileType::kDirectory ? 'd' : t == dfs::FileType::kSymlink ? 'l' : 'f';
}

std::string Permissions(const dfs::FoundEntry& e) {
  std::string s = "----------";
  s[0] = e.type == dfs::FileType::kDirectory ? 'd' : e.type == dfs::FileType::kSymlink ? 'l' : '-';
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) {
    if (e.mode & (0400u >> i)) s[1 + i] = rwx[i];
  }
  auto special = [&](int pos, uint32_t bit, char set, char unset_x) {
    if (e.mode & bit) s[pos] = s[pos] == '-' ? unset_x : set;
  };
  special(3, 04000, 's', 'S');
  special(6, 02000, 's', 'S');
  special(9, 01000, 't', 'T');
  return s;
}

// Nanoseconds as GNU find prints fractions: 9 digits and a 0.
std::string Fraction(absl::Time t) {
  int64_t ns = absl::ToUnixNanos(t) % 1000000000;
  if (ns < 0) ns += 1000000000;
  char buf[16];
  std::snprintf(buf, sizeof(buf), ".%09lld0", static_cast<long long>(ns));
  return buf;
}

// %Tk: one strftime conversion, with find's additions (@ + and fractions on S and T).
std::string TimeField(char k, absl::Time t) {
  absl::TimeZone tz = absl::LocalTimeZone();
  switch (k) {
    case '@':
      return absl::StrCat(absl::ToUnixSeconds(t), Fraction(t));
    case '+':
      return absl::FormatTime("%Y-%m-%d+%H:%M:%S", t, tz) + Fraction(t);
    case 'S':
      return absl::FormatTime("%S", t, tz) + Fraction(t);
    case 'T':
      return absl::FormatTime("%H:%M:%S", t, tz) + Fraction(t);
    default:
      return absl::FormatTime(std::string("%") + k, t, tz);
  }
}

// The full %t form: "Mon Nov 23 18:49:56.3995005710 2026".
std::string CTime(absl::Time t) {
  absl::TimeZone tz = absl::LocalTimeZone();
  return absl::FormatTime("%a %b %e %H:%M:%S", t, tz) + Fraction(t) +
         absl::FormatTime(" %Y", t, tz);
}

}  // namespace

std::string FormatPrintf(std::string_view format, const dfs::FoundEntry& entry,
                         std::string_view path, std::string_view root, const Env& env) {
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '\\' && i + 1 < format.size()) {
      char n = format[++i];
      switch (n) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'r':
          out += '\r';
          break;
        case 'v':
          out += '\v';
          break;
        case '\\':
          out += '\\';
          break;
        case 'c':
          return out;  // stop printing
        default:
          if (n >= '0' && n <= '7') {
            int v = 0;
            size_t k = 0;
            for (; k < 3 && i < format.size() && format[i] >= '0' && format[i] <= '7'; ++k, ++i) {
              v = v * 8 + (format[i] - '0');
            }
            --i;
            out += static_cast<char>(v);
          } else {
            out += '\\';
            out += n;
          }
      }
      continue;
    }
    if (c != '%' || i + 1 >= format.size()) {
      out += c;
      continue;
    }
    // %[flags][width][.precision]directive
    size_t start = ++i;
    while (i < format.size() &&
           std::string_view("-+ #0").find(format[i]) != std::string_view::npos) {
      ++i;
    }
    while (i < format.size() && ((format[i] >= '0' && format[i] <= '9') || format[i] == '.')) ++i;
    if (i >= format.size()) break;
    std::string spec(format.substr(start, i - start));
    char d = format[i];
    std::string field;
    bool numeric = false;
    switch (d) {
      case '%':
        out += '%';
        continue;
      case 'p':
        field = std::string(path);
        break;
      case 'f':
        field = std::string(Basename(path));
        break;
      case 'h':
        field = entry.depth == 0 && path.find('/') == std::string_view::npos
                    ? "."
                    : std::string(Dirname(path));
        break;
      case 'P': {
        std::string_view rest = path.substr(std::min(path.size(), root.size()));
        if (!rest.empty() && rest[0] == '/') rest.remove_prefix(1);
        field = std::string(rest);
        break;
      }
      case 'H':
        field = std::string(root);
        break;
      case 's':
        field = absl::StrCat(entry.size);
        numeric = true;
        break;
      case 'd':
        field = absl::StrCat(entry.depth);
        numeric = true;
        break;
      case 'm': {
        char buf[16];
        std::snprintf(buf, sizeof(buf), "%o", entry.mode & 07777);
        field = buf;
        break;
      }
      case 'M':
        field = Permissions(entry);
        break;
      case 'y':
        field = std::string(1, TypeLetter(entry.type));
        break;
      case 'Y':
        field = std::string(1, entry.type == dfs::FileType::kSymlink && env.target_type != nullptr
                                   ? (*env.target_type)(entry)
                                   : TypeLetter(entry.type));
        break;
      case 'k':
        field = absl::StrCat((entry.size + 1023) / 1024);
        numeric = true;
        break;
      case 'b':
        field = absl::StrCat((entry.size + 511) / 512);
        numeric = true;
        break;
      case 'n':
        field = "1";
        numeric = true;
        break;
      case 'i':
        field = absl::StrCat(entry.ino);
        numeric = true;
        break;
      case 'u':
        field = env.owner;
        break;
      case 'g':
        field = env.group;
        break;
      case 'U':
      case 'G':
        field = "0";
        numeric = true;
        break;
      case 'l':
        if (entry.type == dfs::FileType::kSymlink && env.link_target != nullptr) {
          field = (*env.link_target)(entry);
        }
        break;
      case 'a':
      case 'c':
      case 't':
        field = CTime(entry.mtime);
        break;  // the DFS keeps one time: the mtime
      case 'A':
      case 'C':
      case 'T':
        if (i + 1 >= format.size()) {
          out += '%';
          out += d;
          continue;
        }
        field = TimeField(format[++i], entry.mtime);
        break;
      default:  // unknown: printed as it is, as GNU find does after warning
        out += '%';
        out += spec;
        out += d;
        continue;
    }
    if (spec.empty()) {
      out += field;
    } else {
      std::string fmt = "%" + spec + "s";
      if (numeric && spec.find('.') == std::string::npos) fmt = "%" + spec + "s";
      int n = std::snprintf(nullptr, 0, fmt.c_str(), field.c_str());
      std::string buf(static_cast<size_t>(n) + 1, '\0');
      std::snprintf(buf.data(), buf.size(), fmt.c_str(), field.c_str());
      buf.resize(static_cast<size_t>(n));
      out += buf;
    }
  }
  return out;
}

char TargetTypeLetter(const absl::StatusOr<dfs::Stat>& target) {
  if (target.ok()) return TypeLetter(target->type);
  if (absl::IsNotFound(target.status())) return 'N';
  return dfs::ErrnoOf(target.status()) == ELOOP ? 'L' : '?';
}

std::string FormatLs(const dfs::FoundEntry& entry, std::string_view path, const Env& env) {
  absl::TimeZone tz = absl::LocalTimeZone();
  // Recent (within six months): month, day, time; else month, day, year.
  absl::Duration age = env.now - entry.mtime;
  bool recent = age < absl::Hours(24 * 365 / 2) && age > -absl::Hours(1);
  std::string when = absl::FormatTime(recent ? "%b %e %H:%M" : "%b %e  %Y", entry.mtime, tz);
  char head[256];
  std::snprintf(head, sizeof(head), "%9llu %6llu %s %3d %-8s %-8s %8llu %s ",
                static_cast<unsigned long long>(entry.ino),
                static_cast<unsigned long long>((entry.size + 1023) / 1024),
                Permissions(entry).c_str(), 1, env.owner.c_str(), env.group.c_str(),
                static_cast<unsigned long long>(entry.size), when.c_str());
  std::string line = head + std::string(path);
  if (entry.type == dfs::FileType::kSymlink && env.link_target != nullptr) {
    absl::StrAppend(&line, " -> ", (*env.link_target)(entry));
  }
  return line;
}

}  // namespace ardma::find
