import { coreCases } from './core-cases.js';

coreCases();
