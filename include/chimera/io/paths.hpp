#pragma once
// Output files: they may name folders that do not exist yet (`runs/demo/m.jsonl`), and a file
// that takes long to write must never be left half written under its name, nor replace one of
// the inputs it is made from.
#include <functional>
#include <string>

namespace chimera::io {

// Creates the folder that will hold `path`; InputError naming it when that is impossible.
void create_parent_directory(const std::string& path);

// InputError (naming `what` it is, e.g. "--metrics") when `path` cannot be written: a
// directory, or under a file, or without permission. Creates its folder; leaves the file as it
// was. Run at setup, so that a run never finds out after its last step that it cannot write
// what it produced.
void require_writable(const std::string& path, const std::string& what);

// Writes `path` whole or not at all: `write` fills a temporary file beside it, which then
// replaces `path` by a rename. On any failure the temporary is removed and `path` is untouched.
// InputError when `path` is a directory.
void write_via_temporary(const std::string& path,
                         const std::function<void(const std::string& temporary)>& write);

// InputError when the output `path` is the same file as one of `inputs` (through any links):
// writing it would destroy what is being read.
void require_not_an_input(const std::string& path, std::initializer_list<std::string> inputs);

}  // namespace chimera::io
