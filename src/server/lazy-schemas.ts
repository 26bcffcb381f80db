/**
 * Fastify compiles every route's validators (Ajv) and response serializers (fast-json-stringify)
 * while the server starts: about a fifth of `kvb serve`'s start-up in its CPU profile
 * (`npm run bench:profile -- --startup`). These builders hand Fastify the same compilers with the
 * same options, but each schema is compiled after the server listens, in the background, or when
 * its route is first used if that comes sooner: start-up skips that work.
 */
import AjvCompiler from '@fastify/ajv-compiler';
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyServerOptions } from 'fastify';
import type { FastifyRouteSchemaDef } from 'fastify/types/schema.js';

type Builders = NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>;
type Route = FastifyRouteSchemaDef<unknown>;
type Validate = ((data: unknown) => unknown) & { errors?: unknown };

/**
 * Fastify lower-cases the property names of a header schema only for its own compiler; with these
 * builders it passes them as written, and request header names are lower case. So they must be
 * written in lower case, checked here when the route is registered rather than found by a request.
 */
function checkHeaderSchema(schema: unknown, url: string): void {
  const properties = (schema as { properties?: Record<string, unknown> } | undefined)?.properties ?? {};
  for (const name of Object.keys(properties)) {
    if (name !== name.toLowerCase()) throw new Error(`the header schema of ${url} must name "${name}" in lower case`);
  }
}

/**
 * The builders for one server, and `warm()`, which compiles what is still waiting one schema per
 * event-loop turn: called soon after the server listens, so later requests find their routes
 * ready without start-up waiting for them (a request arriving meanwhile waits for one compile).
 */
export function lazySchemaCompilers(): { builders: Builders; warm(): void } {
  const waiting = new Set<() => void>();
  /** `make`, called once: by warm(), or by the first caller of the returned getter. */
  const later = <T>(make: () => T): (() => T) => {
    let made: T | undefined;
    const ready = () => {
      waiting.delete(ready);
      return (made ??= make());
    };
    waiting.add(ready);
    return () => made ?? ready();
  };

  function buildValidator(externalSchemas: unknown, ajvOptions: unknown) {
    // Even making the Ajv instance compiles its meta-schemas: that waits too.
    let compiler: ((route: Route) => Validate) | undefined;
    const compile = (route: Route) =>
      (compiler ??= AjvCompiler()(externalSchemas as never, ajvOptions as never) as (route: Route) => Validate)(route);
    return (route: Route): Validate => {
      if (route.httpPart === 'headers') checkHeaderSchema(route.schema, route.url);
      const validator = later(() => compile(route));
      const lazy: Validate = (data) => {
        const validate = validator();
        const valid = validate(data);
        // Fastify reads a failed validation's errors from the function it called.
        lazy.errors = validate.errors;
        return valid;
      };
      return lazy;
    };
  }

  function buildSerializer(externalSchemas: unknown, serializerOptions: unknown) {
    const compile = SerializerSelector()(externalSchemas, serializerOptions as never) as (route: Route) => (data: unknown) => string;
    return (route: Route) => {
      const serializer = later(() => compile(route));
      return (data: unknown) => serializer()(data);
    };
  }

  const warm = () => {
    const next = waiting.values().next();
    if (next.done) return;
    next.value();
    setImmediate(warm);
  };
  return { builders: { buildValidator, buildSerializer } as unknown as Builders, warm };
}
