// ELF checks of shipped native code (see elf_check.h).
#include "core/active/elf_check.h"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ardma {
namespace {

absl::Status Bad(const char* why) {
  return absl::InvalidArgumentError(absl::StrCat("cannot load shared object: ", why));
}

bool Within(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

template <typename T>
T At(std::string_view code, uint64_t offset) {
  T value;
  std::memcpy(&value, code.data() + offset, sizeof(T));
  return value;
}

using FileOffset = std::function<bool(uint64_t vaddr, uint64_t len, uint64_t* offset)>;

bool NameIn(std::string_view strings, uint64_t name) {
  return name < strings.size() && strings.find('\0', name) != std::string_view::npos;
}

// The dynamic symbol table (its size from the section headers, which must agree with the dynamic
// section), every symbol's name, the version index table and the hash table's bucket and chain
// indexes: what symbol lookup reads.
absl::Status CheckSymbols(std::string_view code, const Elf64_Ehdr& eh, uint64_t symtab,
                          uint64_t gnu_hash, uint64_t sysv_hash, uint64_t versym,
                          std::string_view strings, const FileOffset& file_offset,
                          uint64_t* symbol_count) {
  if (symtab == 0) return Bad("no dynamic symbol table");
  uint64_t count = 0;
  bool found = false;
  for (int i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh = At<Elf64_Shdr>(code, eh.e_shoff + i * sizeof(Elf64_Shdr));
    if (sh.sh_type == SHT_DYNSYM) {
      if (found || sh.sh_addr != symtab || sh.sh_entsize != sizeof(Elf64_Sym)) {
        return Bad("damaged dynamic symbol table");
      }
      count = sh.sh_size / sizeof(Elf64_Sym);
      found = true;
    }
  }
  uint64_t at = 0;
  if (!found || count == 0 || !file_offset(symtab, count * sizeof(Elf64_Sym), &at)) {
    return Bad("dynamic symbol table outside the object");
  }
  for (uint64_t i = 0; i < count; ++i) {
    if (!NameIn(strings, At<Elf64_Sym>(code, at + i * sizeof(Elf64_Sym)).st_name)) {
      return Bad("a symbol name outside the string table");
    }
  }
  if (versym != 0 && !file_offset(versym, count * sizeof(Elf64_Half), &at)) {
    return Bad("symbol versions outside the object");
  }
  *symbol_count = count;
  if (gnu_hash != 0) {
    uint64_t h = 0;
    if (!file_offset(gnu_hash, 16, &h)) return Bad("hash table outside the object");
    uint32_t nbuckets = At<uint32_t>(code, h), symoffset = At<uint32_t>(code, h + 4),
             bloom = At<uint32_t>(code, h + 8);
    uint64_t buckets = h + 16 + uint64_t{bloom} * 8;
    uint64_t chains = buckets + uint64_t{nbuckets} * 4;
    if (symoffset > count || nbuckets == 0 || bloom == 0 ||
        !Within(h, 16 + uint64_t{bloom} * 8 + uint64_t{nbuckets} * 4 + (count - symoffset) * 4,
                code.size()) ||
        !file_offset(gnu_hash, chains + (count - symoffset) * 4 - h, &h)) {
      return Bad("damaged hash table");
    }
    for (uint32_t b = 0; b < nbuckets; ++b) {
      uint32_t first = At<uint32_t>(code, buckets + b * 4);
      if (first != 0 && (first < symoffset || first >= count)) return Bad("damaged hash table");
    }
    // Each chain runs to an entry with the low bit set, before the table's end.
    if (count > symoffset && (At<uint32_t>(code, chains + (count - symoffset - 1) * 4) & 1) == 0) {
      return Bad("damaged hash table");
    }
  }
  if (sysv_hash != 0) {
    uint64_t h = 0;
    if (!file_offset(sysv_hash, 8, &h)) return Bad("hash table outside the object");
    uint32_t nbucket = At<uint32_t>(code, h), nchain = At<uint32_t>(code, h + 4);
    if (nchain != count || !file_offset(sysv_hash, 8 + (uint64_t{nbucket} + nchain) * 4, &h)) {
      return Bad("damaged hash table");
    }
    for (uint64_t i = 0; i < uint64_t{nbucket} + nchain; ++i) {
      if (At<uint32_t>(code, h + 8 + i * 4) >= count) return Bad("damaged hash table");
    }
  }
  return absl::OkStatus();
}

// The version needs and definitions: each entry, its auxiliary entries and their names; and
// each symbol's version index, which the loader uses to index its table of versions.
absl::Status CheckVersions(std::string_view code, uint64_t verneed, uint64_t verneednum,
                           uint64_t verdef, uint64_t verdefnum, uint64_t versym,
                           uint64_t symbol_count, std::string_view strings,
                           const FileOffset& file_offset) {
  uint64_t at = 0;
  uint64_t max_index = 1;  // 0: local, 1: global
  if (verneed != 0) {
    if (verneednum > 1024 || !file_offset(verneed, sizeof(Elf64_Verneed), &at)) {
      return Bad("damaged version table");
    }
    for (uint64_t i = 0; i < verneednum; ++i) {
      if (!Within(at, sizeof(Elf64_Verneed), code.size())) return Bad("damaged version table");
      Elf64_Verneed vn = At<Elf64_Verneed>(code, at);
      if (!NameIn(strings, vn.vn_file) || vn.vn_cnt > 1024) return Bad("damaged version table");
      uint64_t aux = at + vn.vn_aux;
      for (uint32_t j = 0; j < vn.vn_cnt; ++j) {
        if (!Within(aux, sizeof(Elf64_Vernaux), code.size())) return Bad("damaged version table");
        Elf64_Vernaux va = At<Elf64_Vernaux>(code, aux);
        if (!NameIn(strings, va.vna_name)) return Bad("damaged version table");
        max_index = std::max<uint64_t>(max_index, va.vna_other & 0x7fff);
        aux += va.vna_next;
      }
      at += vn.vn_next;
    }
  }
  if (verdef != 0) {
    if (verdefnum > 1024 || !file_offset(verdef, sizeof(Elf64_Verdef), &at)) {
      return Bad("damaged version table");
    }
    for (uint64_t i = 0; i < verdefnum; ++i) {
      if (!Within(at, sizeof(Elf64_Verdef), code.size())) return Bad("damaged version table");
      Elf64_Verdef vd = At<Elf64_Verdef>(code, at);
      if (vd.vd_cnt > 1024) return Bad("damaged version table");
      max_index = std::max<uint64_t>(max_index, vd.vd_ndx & 0x7fff);
      uint64_t aux = at + vd.vd_aux;
      for (uint32_t j = 0; j < vd.vd_cnt; ++j) {
        if (!Within(aux, sizeof(Elf64_Verdaux), code.size())) return Bad("damaged version table");
        Elf64_Verdaux va = At<Elf64_Verdaux>(code, aux);
        if (!NameIn(strings, va.vda_name)) return Bad("damaged version table");
        aux += va.vda_next;
      }
      at += vd.vd_next;
    }
  }
  if (versym != 0) {
    if (max_index > 4096 || !file_offset(versym, symbol_count * sizeof(Elf64_Half), &at)) {
      return Bad("damaged version table");
    }
    for (uint64_t i = 0; i < symbol_count; ++i) {
      if ((At<Elf64_Half>(code, at + i * sizeof(Elf64_Half)) & 0x7fff) > max_index) {
        return Bad("a symbol's version is not in the version table");
      }
    }
  }
  return absl::OkStatus();
}

// The dynamic section: where the loader reads names and applies relocations. A damaged entry
// there makes ld.so read past the object or write into memory that is not the object's — in the
// server, corrupting its state silently, which no trial load can see. So: every string the loader
// reads lies in the string table, the tables lie in the file, every relocation writes a word
// inside one of the object's own writable-or-RELRO load segments.
absl::Status CheckDynamic(std::string_view code, const Elf64_Ehdr& eh) {
  std::vector<Elf64_Phdr> loads;
  const Elf64_Phdr* dynamic = nullptr;
  Elf64_Phdr dynamic_copy;
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph = At<Elf64_Phdr>(code, eh.e_phoff + i * sizeof(Elf64_Phdr));
    if (ph.p_type == PT_LOAD) loads.push_back(ph);
    if (ph.p_type == PT_DYNAMIC) {
      dynamic_copy = ph;
      dynamic = &dynamic_copy;
    }
  }
  if (loads.empty()) return Bad("no loadable segment");
  if (dynamic == nullptr) return Bad("no dynamic section");
  // A virtual address's file offset, if [vaddr, vaddr + len) is backed by file bytes.
  FileOffset file_offset = [&](uint64_t vaddr, uint64_t len, uint64_t* out) {
    for (const Elf64_Phdr& ph : loads) {
      if (vaddr >= ph.p_vaddr && Within(vaddr - ph.p_vaddr, len, ph.p_filesz)) {
        *out = ph.p_offset + (vaddr - ph.p_vaddr);
        return true;
      }
    }
    return false;
  };
  auto in_segment = [&](uint64_t vaddr, uint64_t len) {
    for (const Elf64_Phdr& ph : loads) {
      if (vaddr >= ph.p_vaddr && Within(vaddr - ph.p_vaddr, len, ph.p_memsz)) return true;
    }
    return false;
  };
  if (dynamic->p_filesz % sizeof(Elf64_Dyn) != 0) return Bad("damaged dynamic section");
  uint64_t strtab = 0, strsz = 0, rela = 0, relasz = 0, relaent = sizeof(Elf64_Rela), jmprel = 0,
           pltrelsz = 0;
  uint64_t symtab = 0, gnu_hash = 0, sysv_hash = 0, versym = 0, verneed = 0, verneednum = 0,
           verdef = 0, verdefnum = 0;
  std::vector<uint64_t> names;  // string-table offsets the loader reads
  bool ended = false;
  for (uint64_t at = dynamic->p_offset;
       at + sizeof(Elf64_Dyn) <= dynamic->p_offset + dynamic->p_filesz; at += sizeof(Elf64_Dyn)) {
    Elf64_Dyn d = At<Elf64_Dyn>(code, at);
    if (d.d_tag == DT_NULL) {
      ended = true;
      break;
    }
    switch (d.d_tag) {
      case DT_STRTAB:
        strtab = d.d_un.d_ptr;
        break;
      case DT_STRSZ:
        strsz = d.d_un.d_val;
        break;
      case DT_RELA:
        rela = d.d_un.d_ptr;
        break;
      case DT_RELASZ:
        relasz = d.d_un.d_val;
        break;
      case DT_RELAENT:
        relaent = d.d_un.d_val;
        break;
      case DT_JMPREL:
        jmprel = d.d_un.d_ptr;
        break;
      case DT_PLTRELSZ:
        pltrelsz = d.d_un.d_val;
        break;
      case DT_PLTREL:
        if (d.d_un.d_val != DT_RELA) return Bad("damaged dynamic section (PLT relocation type)");
        break;
      case DT_REL:
      case DT_RELSZ:
      case DT_TEXTREL:
        return Bad("REL relocations or text relocations (not produced for x86-64/AArch64 PIC)");
      case DT_SYMTAB:
        symtab = d.d_un.d_ptr;
        break;
      case DT_SYMENT:
        if (d.d_un.d_val != sizeof(Elf64_Sym)) return Bad("damaged dynamic section (symbol size)");
        break;
      case DT_GNU_HASH:
        gnu_hash = d.d_un.d_ptr;
        break;
      case DT_HASH:
        sysv_hash = d.d_un.d_ptr;
        break;
      case DT_VERSYM:
        versym = d.d_un.d_ptr;
        break;
      case DT_VERNEED:
        verneed = d.d_un.d_ptr;
        break;
      case DT_VERNEEDNUM:
        verneednum = d.d_un.d_val;
        break;
      case DT_VERDEF:
        verdef = d.d_un.d_ptr;
        break;
      case DT_VERDEFNUM:
        verdefnum = d.d_un.d_val;
        break;
      case DT_NEEDED:
      case DT_SONAME:
      case DT_RPATH:
      case DT_RUNPATH:
        names.push_back(d.d_un.d_val);
        break;
      default:
        break;
    }
  }
  if (!ended) return Bad("damaged dynamic section (no end)");
  uint64_t strtab_offset = 0;
  if (strsz == 0 || !file_offset(strtab, strsz, &strtab_offset)) {
    return Bad("string table outside the object");
  }
  std::string_view strings = code.substr(strtab_offset, strsz);
  for (uint64_t name : names) {
    if (!NameIn(strings, name)) {
      return Bad("a library name outside the string table");
    }
  }
  uint64_t symbol_count = 0;
  if (absl::Status s = CheckSymbols(code, eh, symtab, gnu_hash, sysv_hash, versym, strings,
                                    file_offset, &symbol_count);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckVersions(code, verneed, verneednum, verdef, verdefnum, versym,
                                     symbol_count, strings, file_offset);
      !s.ok()) {
    return s;
  }
  if (relaent != sizeof(Elf64_Rela)) return Bad("damaged dynamic section (relocation size)");
  for (auto [table, size] : {std::pair{rela, relasz}, std::pair{jmprel, pltrelsz}}) {
    if (size == 0) continue;
    uint64_t offset = 0;
    if (size % sizeof(Elf64_Rela) != 0 || !file_offset(table, size, &offset)) {
      return Bad("relocation table outside the object");
    }
    for (uint64_t at = offset; at < offset + size; at += sizeof(Elf64_Rela)) {
      Elf64_Rela r = At<Elf64_Rela>(code, at);
      if (!in_segment(r.r_offset, 8)) {
        return Bad("a relocation writes outside the object");
      }
      // ld.so reads the symbol a relocation names without a bound (a LOAD fuzzer finding).
      if (ELF64_R_SYM(r.r_info) != 0 && ELF64_R_SYM(r.r_info) >= symbol_count) {
        return Bad("a relocation names a symbol outside the symbol table");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

// dlopen trusts the file: a segment that reaches past the end of the bytes is mapped anyway and
// faults (SIGBUS) when touched. So check the structure first.
// Every allocated section with file contents is mapped from its own file bytes: it lies in a
// loadable segment whose address-to-offset shift is the section's. A segment whose offset was
// damaged maps other bytes (section headers, strings) where code expects its constants and unwind
// tables; those load and even run in a trial, then fault in the server later (the robustness
// test's copy 24 of 1,000 did, when it was unloaded). Objects without section headers are not
// checked (the loader does not need them).
absl::Status CheckSectionsMapped(std::string_view code, const Elf64_Ehdr& eh) {
  for (int i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh = At<Elf64_Shdr>(code, eh.e_shoff + uint64_t{sizeof(Elf64_Shdr)} * i);
    if ((sh.sh_flags & SHF_ALLOC) == 0 || sh.sh_type == SHT_NOBITS || sh.sh_size == 0) continue;
    bool mapped = false;
    for (int j = 0; j < eh.e_phnum && !mapped; ++j) {
      Elf64_Phdr ph = At<Elf64_Phdr>(code, eh.e_phoff + uint64_t{sizeof(Elf64_Phdr)} * j);
      if (ph.p_type != PT_LOAD || sh.sh_addr < ph.p_vaddr ||
          !Within(sh.sh_addr - ph.p_vaddr, sh.sh_size, ph.p_filesz)) {
        continue;
      }
      if (ph.p_offset + (sh.sh_addr - ph.p_vaddr) != sh.sh_offset) {
        return Bad("a segment maps a section from the wrong place in the file");
      }
      mapped = true;
    }
    if (!mapped) return Bad("a section lies outside every loadable segment");
  }
  return absl::OkStatus();
}

absl::Status CheckElf(std::string_view code) {
  if (code.size() < sizeof(Elf64_Ehdr)) return Bad("truncated ELF header");
  Elf64_Ehdr eh;
  std::memcpy(&eh, code.data(), sizeof(eh));
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    return Bad("not a 64-bit little-endian ELF object");
  }
#if defined(__x86_64__)
  if (eh.e_machine != EM_X86_64) return Bad("built for another machine");
#elif defined(__aarch64__)
  if (eh.e_machine != EM_AARCH64) return Bad("built for another machine");
#endif
  if (eh.e_type != ET_DYN) return Bad("not a shared object");
  uint64_t size = code.size();
  if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
      !Within(eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr), size)) {
    return Bad("program headers outside the file (truncated?)");
  }
  if (eh.e_shnum != 0 && (eh.e_shentsize != sizeof(Elf64_Shdr) ||
                          !Within(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr), size))) {
    return Bad("section headers outside the file (truncated?)");
  }
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, code.data() + eh.e_phoff + i * sizeof(Elf64_Phdr), sizeof(ph));
    if (ph.p_type != PT_NULL && !Within(ph.p_offset, ph.p_filesz, size)) {
      return Bad("a segment reaches past the end of the file (truncated?)");
    }
  }
  if (absl::Status mapped = CheckSectionsMapped(code, eh); !mapped.ok()) return mapped;
  return CheckDynamic(code, eh);
}

}  // namespace ardma
