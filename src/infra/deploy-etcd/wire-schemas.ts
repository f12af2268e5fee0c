// The shapes of what etcd's v3 JSON gateway answers, as TypeBox schemas. Its
// JSON is protobuf's: base64 keys and values, int64s as strings, and a field
// at its default left out, so nearly every field is optional.
import { Type } from '../../domain/typebox.js'

const Header = Type.Object({ revision: Type.Optional(Type.String()), cluster_id: Type.Optional(Type.String()) })

export const KeyValue = Type.Object({
  key: Type.String(),
  // Absent when the value is empty.
  value: Type.Optional(Type.String()),
  create_revision: Type.Optional(Type.String()),
  mod_revision: Type.Optional(Type.String()),
})

export const RangeResponse = Type.Object({
  header: Type.Optional(Header),
  kvs: Type.Optional(Type.Array(KeyValue)),
  more: Type.Optional(Type.Boolean()),
})

export const TxnResponse = Type.Object({
  header: Type.Optional(Header),
  succeeded: Type.Optional(Type.Boolean()),
  responses: Type.Optional(Type.Array(Type.Object({ response_range: Type.Optional(RangeResponse) }))),
})

export const WatchLine = Type.Object({
  result: Type.Optional(
    Type.Object({
      header: Type.Optional(Header),
      created: Type.Optional(Type.Boolean()),
      canceled: Type.Optional(Type.Boolean()),
      cancel_reason: Type.Optional(Type.String()),
      compact_revision: Type.Optional(Type.String()),
      events: Type.Optional(
        Type.Array(
          Type.Object({
            type: Type.Optional(Type.String()),
            kv: Type.Optional(
              Type.Object({ key: Type.Optional(Type.String()), mod_revision: Type.Optional(Type.String()) }),
            ),
          }),
        ),
      ),
    }),
  ),
  error: Type.Optional(Type.Object({ message: Type.Optional(Type.String()) })),
})

export const AuthenticateResponse = Type.Object({
  header: Type.Optional(Header),
  token: Type.Optional(Type.String()),
})

export const LeaseGrantResponse = Type.Object({
  header: Type.Optional(Header),
  ID: Type.Optional(Type.String()),
  TTL: Type.Optional(Type.String()),
  error: Type.Optional(Type.String()),
})

export const LeaseKeepAliveResponse = Type.Object({
  result: Type.Optional(
    Type.Object({ header: Type.Optional(Header), ID: Type.Optional(Type.String()), TTL: Type.Optional(Type.String()) }),
  ),
  error: Type.Optional(Type.Object({ message: Type.Optional(Type.String()) })),
})
