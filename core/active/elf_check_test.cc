#include "core/active/elf_check.h"

#include <elf.h>

#include <cstring>
#include <string>

#include "core/active/testdata/test_library.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

using ::testing::HasSubstr;

// The section header of the first section of `type` in `elf`.
Elf64_Shdr Section(const std::string& elf, uint32_t type) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof(eh));
  for (int i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, elf.data() + eh.e_shoff + i * sizeof(sh), sizeof(sh));
    if (sh.sh_type == type) return sh;
  }
  ADD_FAILURE() << "no section of type " << type;
  return {};
}

// Each damage that makes ld.so read or write outside the object — which a trial load in another
// process may not see, its address space being laid out differently — is refused by name.
TEST(ElfCheckTest, RefusesWhatWouldMakeTheLoaderReadOrWriteOutsideTheObject) {
  const std::string good(active_libraries::test2().code());
  EXPECT_TRUE(CheckElf(good).ok()) << CheckElf(good);

  std::string bad = good;
  Elf64_Shdr rela = Section(good, SHT_RELA);
  uint64_t far = uint64_t{1} << 40;
  std::memcpy(bad.data() + rela.sh_offset + offsetof(Elf64_Rela, r_offset), &far, 8);
  EXPECT_THAT(CheckElf(bad).message(), HasSubstr("a relocation writes outside the object"));

  // A relocation naming symbol 0x70000 of a table of a few (the LOAD fuzzer's first finding,
  // core/active/testdata/load_fuzz_findings: ld.so crashed on it in one process, not in another).
  bad = good;
  Elf64_Xword info;
  std::memcpy(&info, good.data() + rela.sh_offset + offsetof(Elf64_Rela, r_info), 8);
  info = ELF64_R_INFO(0x70000, ELF64_R_TYPE(info));
  std::memcpy(bad.data() + rela.sh_offset + offsetof(Elf64_Rela, r_info), &info, 8);
  EXPECT_THAT(CheckElf(bad).message(),
              HasSubstr("a relocation names a symbol outside the symbol table"));

  bad = good;
  Elf64_Shdr versym = Section(good, SHT_GNU_versym);
  Elf64_Half index = 0x85;
  std::memcpy(bad.data() + versym.sh_offset + 2 * sizeof(Elf64_Half), &index, 2);
  EXPECT_THAT(CheckElf(bad).message(), HasSubstr("version is not in the version table"));

  bad = good;
  Elf64_Shdr dynsym = Section(good, SHT_DYNSYM);
  uint32_t name = 1u << 30;
  std::memcpy(bad.data() + dynsym.sh_offset + sizeof(Elf64_Sym) + offsetof(Elf64_Sym, st_name),
              &name, 4);
  EXPECT_THAT(CheckElf(bad).message(), HasSubstr("a symbol name outside the string table"));

  bad = good;
  Elf64_Shdr verneed = Section(good, SHT_GNU_verneed);
  std::memcpy(bad.data() + verneed.sh_offset + offsetof(Elf64_Verneed, vn_file), &name, 4);
  EXPECT_THAT(CheckElf(bad).message(), HasSubstr("damaged version table"));

  // A loadable segment moved to another page of the file (the robustness test's copy 24: it
  // loaded and unloaded in its trial, then crashed the server when unloaded there).
  bad = good;
  Elf64_Ehdr eh;
  std::memcpy(&eh, good.data(), sizeof(eh));
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, good.data() + eh.e_phoff + i * sizeof(ph), sizeof(ph));
    if (ph.p_type == PT_LOAD && ph.p_offset != 0 && ph.p_filesz > 0) {
      ph.p_offset += 0x1000;
      std::memcpy(bad.data() + eh.e_phoff + i * sizeof(ph), &ph, sizeof(ph));
      break;
    }
  }
  EXPECT_THAT(CheckElf(bad).message(), HasSubstr("maps a section from the wrong place"));

  bad = good.substr(0, good.size() / 2);
  EXPECT_THAT(CheckElf(bad).message(), HasSubstr("cannot load shared object"));
}

}  // namespace
}  // namespace ardma
