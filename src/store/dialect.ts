/** The two SQL dialects kvb's statements compile to. */
export type Dialect = 'sqlite' | 'postgres';
