// The escape catalogue on the Docker backend, under runc and under gVisor (runsc).
import { makeBackend } from '../support/docker.js';
import { escapeCases } from './escape-cases.js';

escapeCases('docker, runc', makeBackend);
escapeCases('docker, runsc', makeBackend, 'runsc');
