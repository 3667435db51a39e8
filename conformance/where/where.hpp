// `xmc where ID`: everything about one requirement in one hop (issue: a newcomer
// reaches a requirement's test, model rule and backend code from its ID): the
// catalogue row, every test body (file:line, from the registered tests), and
// every line of the model, the backends, the fakes and the harness that names the
// ID, and the broken backends that declare they must fail it. The index of
// source lines is generated at build time (where_gen.cpp), so an xmc carried to
// another machine answers without the sources.
#pragma once
#include <string>

namespace xmc::conformance {

struct WhereEntry {
    const char *id;
    const char *kind;  // model | host | cuda | level_zero | common | fakes | harness | hardware | broken | broken-fails
    const char *file;  // relative to the source root
    int line;
    const char *text;  // the line, trimmed
};
extern const WhereEntry kWhereIndex[];
extern const int kWhereIndexCount;
extern const char *const kWhereSourceRoot;

// Prints where requirement `id` lives; 0, or 2 for an ID not in the catalogue.
int where_command(const std::string &id);

} // namespace xmc::conformance
