// TypeBox as layoutd loads it at run time: the builder (Type), the checker
// (Value) and the compiler (Compile), from this one module. The build
// (scripts/after-tsc.mjs) replaces its compiled form with one bundled file,
// since linking the package's many ES modules one by one slows every start
// (design §4.4). Types alone may still be imported from 'typebox'.
import Type from 'typebox'
import Compile from 'typebox/compile'
import Value from 'typebox/value'

export { Compile, Type, Value }
