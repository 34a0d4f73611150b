// Package reactions turns reaction files into Salt low chunks, as Salt's
// reactor does with the files its rules name: it loads and caches the files,
// renders them for one event, and compiles what they render. It knows
// nothing of NATS, drivers or the store; package engine calls it for each
// rule that admitted an event.
//
// The main types:
//
//   - Library loads reaction files and expands SLS path globs (PyGlob, with
//     Python's glob rules), caching both and noticing changes on disk. Its
//     Frontend, when set, prepares each file's source first: the engine's
//     front end picks the renderer as Salt does and translates Salt's Jinja
//     files with package jinja (which does not import this package).
//   - File is one reaction file: a Template compiled once, and the
//     skeletons of the shapes it has rendered. File.Render renders it for
//     one event into Reactions. A value from event data fills only the
//     scalar it was printed in: it can never add, remove or move a key, an
//     argument or a reaction (see skeleton.go).
//   - Limits bound what one render may cost (bytes, printed values, YAML
//     read, steps, time); a render that crosses one fails with a
//     LimitError.
//   - SaltCalls lets a file call Salt functions (read-only ones by default) while it renders
//     (salt['pillar.get'](...)): the functions it allows, through a
//     SaltCaller (the driver), within a time budget per render, answers
//     cached for a while.
//   - High is the merged high data of one event: High.Add takes each file's
//     Reactions, High.Verify checks them as Salt's verify_high does, and
//     High.Compile orders them into low chunks as compile_high_data does.
//
// Errors point at the file, line and column of their cause (PosError).
// Templates see sprig's functions without those that read the host, and
// helpers with Python's semantics (package jinja/py) that files translated
// from Jinja call, and saltFn (salt['fun'](...), see SaltCalls).
package reactions
