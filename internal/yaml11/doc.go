// Package yaml11 parses YAML and types its scalars exactly the way Salt does.
//
// Salt renders a reactor (or state) file to text and loads that text with
// salt.utils.yamlloader.SaltYamlSafeLoader: PyYAML's SafeLoader (backed by
// libyaml's CSafeLoader when available) with a few Salt overrides. Scalars
// are therefore typed by the YAML 1.1 implicit resolvers of PyYAML's
// yaml/resolver.py and built by the constructors of yaml/constructor.py, not
// by YAML 1.2 rules: `yes` and `on` are booleans, `1e3` is a string, `12:30`
// is the integer 750. reactord parses the text with go.yaml.in/yaml/v3 (a Go
// port of libyaml, so the accepted syntax largely matches CSafeLoader's) and
// uses this package to reproduce the typing.
//
// The Salt overrides reproduced here (salt/utils/yamlloader.py, Salt 3006
// and later) are:
//
//   - SaltYamlSafeLoader.construct_scalar strips the leading zeros of every
//     scalar tagged int whose text starts with "0" (other than "0" itself and
//     texts starting "0b" or "0x") before PyYAML's construct_yaml_int sees it:
//     `010` is 10, not octal 8. Signed texts keep their zeros (`-010` is -8).
//   - tag:yaml.org,2002:timestamp is constructed with construct_scalar, so
//     timestamps (`2024-01-15`) stay strings.
//   - SaltYamlSafeLoader.construct_mapping builds ordered mappings (Map) and
//     rejects a key equal (by Python ==) to an earlier one with
//     "found conflicting ID '<key>'", and an unhashable (mapping or sequence)
//     key with "found unacceptable key".
//   - SaltYamlSafeLoader.flatten_mapping applies `<<` merge keys by putting
//     the merged pairs first and dropping merged pairs whose key text equals
//     an explicit key's text; merged pairs are not de-duplicated among
//     themselves, so two merged mappings sharing a key is a conflict.
//   - tag:yaml.org,2002:python/unicode builds a string.
//
// Resolve types one plain scalar, Parse builds a Node tree from a document,
// Node.Value materializes it, and PlainSafe tells whether a string can be
// written as a plain scalar unchanged.
package yaml11
