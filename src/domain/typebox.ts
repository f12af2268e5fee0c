// TypeBox as layoutd loads it at run time: the builder (Type), the checker
// (Value) and the compiler (Compile), from this one module. `npm run build`
// (scripts/after-tsc.mjs) replaces this file's compiled form with one
// file holding TypeBox whole: the package is some 700 ES modules, which
// cost a start about half a second of CPU to resolve and link one by one;
// the one file loads in a few tens of milliseconds (design §4.4). Types
// alone (`Static`, `TSchema`) may still be imported from 'typebox' itself.
import Type from 'typebox'
import Compile from 'typebox/compile'
import Value from 'typebox/value'

export { Compile, Type, Value }
