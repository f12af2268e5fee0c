// TypeBox as layoutd loads it at run time: Type, Value and Compile, from
// this one module. The build bundles it, since linking the package's many
// modules slows every start. Types alone may come from 'typebox'.
import Type from 'typebox'
import Compile from 'typebox/compile'
import Value from 'typebox/value'

export { Compile, Type, Value }
