// Linked into `chimera` and every test executable of an AddressSanitizer build
// (cmake/ChimeraSanitizers.cmake; the fuzzers check no leaks and go without it): dlclose does
// nothing, so every shared library a process opens stays mapped until it exits.
//
// Why: Open MPI opens its plugins (mca_*.so, PMIx's) with dlopen and closes them in
// MPI_Finalize, and they leave allocations behind that LeakSanitizer reports at exit. By then the
// plugins are unmapped, so the reports' frames name no module and no suppression can match them
// (tests/sanitizers/lsan.supp) unless every malloc and free records its stack with the slow DWARF
// unwinder through the MPI libraries' own frames, which made the sanitizer pass's launches of
// `chimera` two to three times slower. With the plugins kept, the fast frame-pointer unwinder's
// first frame names the plugin, and the suppressions match it.
//
// The executable's definition comes first in symbol lookup, before libc's, for every library the
// process loads; the link exports it (ChimeraSanitizers.cmake). Nothing here unloads libraries on
// purpose: the CUDA plugin is opened once per process and never closed before exit.
extern "C" int dlclose(void* /*handle*/) noexcept {
  return 0;
}
